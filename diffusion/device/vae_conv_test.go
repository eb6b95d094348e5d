package device

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/cortiq/cortiq/diffusion"
)

// synthVAE writes a random pipeline of shape s under a temp dir and
// returns its VAE decoder's spec.
func synthVAE(tb testing.TB, s diffusion.SynthShape) *diffusion.VAESpec {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "zimage")
	if err := diffusion.WriteSynthetic(dir, s); err != nil {
		tb.Fatal(err)
	}
	p, err := diffusion.Open(dir, diffusion.OpenOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	spec, err := p.VAE.Spec()
	if err != nil {
		tb.Fatal(err)
	}
	return spec
}

// randomLatents is c×h×w values in [-1, 1).
func randomLatents(c, h, w int) []float32 {
	z := make([]float32, c*h*w)
	rng := uint64(0x2545f4914f6cdd1d)
	for i := range z {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		z[i] = float32(rng>>40)/float32(1<<24)*2 - 1
	}
	return z
}

// TestVAEConvTiled: with block widths that are multiples of 16 (so the
// convolutions run on the tiled kernel: output channels that fill one
// 64-wide tile and some that do not, pixel counts off the 64-pixel tile,
// 1x1 shortcuts, upsampling, residuals) the decoder equals the one on the
// one-invocation-per-output kernel within float32 rounding, and banded
// under a small binding limit it gives its unbanded output bit for bit.
func TestVAEConvTiled(t *testing.T) {
	d := testDevice(t)
	s := diffusion.TinySynth()
	s.VAE.BlockOutChannels = []int{32, 48, 80, 80}
	s.VAE.NormNumGroups = 8
	spec := synthVAE(t, s)
	h, w := 6, 5 // a 48x40 image
	z := randomLatents(spec.LatentChannels, h, w)
	decode := func(opts VAEOptions) []float32 {
		dec, err := NewVAEDecoder(d, spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.Close()
		y, err := dec.Decode(z, h, w)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	tiled, naive := decode(VAEOptions{}), decode(VAEOptions{NaiveConv: true})
	banded := decode(VAEOptions{MaxBinding: 40 << 10})
	m, scale := 0.0, 0.0
	for i := range tiled {
		m = max(m, math.Abs(float64(tiled[i]-naive[i])))
		scale = max(scale, math.Abs(float64(naive[i])))
		if math.Float32bits(tiled[i]) != math.Float32bits(banded[i]) {
			t.Fatalf("value %d: banded %g, whole %g", i, banded[i], tiled[i])
		}
	}
	t.Logf("tiled convolutions vs one invocation per output: max |diff| %.3g (values up to %.3g); banded = whole", m, scale)
	if m > 1e-5*max(1, scale) {
		t.Errorf("tiled vs naive convolutions: max |diff| %.3g", m)
	}
}

// BenchmarkVAEDecode times the VAE decoder on the device at -dit.size
// with random weights of -dit.shape's VAE (zimage-turbo: the Flux VAE's
// 128-512 channels), tiled convolutions unless -vae.naive.
func BenchmarkVAEDecode(b *testing.B) {
	shape, ok := diffusion.SynthShapes[*benchShape]
	if !ok {
		b.Fatalf("-dit.shape %q: not a known shape", *benchShape)
	}
	d := testDevice(b)
	s := diffusion.TinySynth()
	s.VAE = shape().VAE
	spec := synthVAE(b, s)
	dec, err := NewVAEDecoder(d, spec, VAEOptions{NaiveConv: *benchNaiveConv})
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Close()
	h := *benchSize / 8
	z := randomLatents(spec.LatentChannels, h, h)
	t0 := time.Now()
	if _, err := dec.Decode(z, h, h); err != nil { // pipelines compiled
		b.Fatal(err)
	}
	b.Logf("%s VAE on %s: %dx%d from %dx%d latents; first decode %.2fs", *benchShape, d.Info().Name, *benchSize, *benchSize, h, h, time.Since(t0).Seconds())
	b.ResetTimer()
	for b.Loop() {
		if _, err := dec.Decode(z, h, h); err != nil {
			b.Fatal(err)
		}
	}
}

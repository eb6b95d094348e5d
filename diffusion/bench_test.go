package diffusion

import (
	"path/filepath"
	"testing"
)

// BenchmarkTinyStep times one denoising step (one transformer forward and
// the Euler update) of the tiny synthetic Z-Image at 256x256 (a 32x32
// latent, 256 image tokens) on the CPU.
func BenchmarkTinyStep(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "zimage")
	if err := WriteSynthetic(dir, TinySynth()); err != nil {
		b.Fatal(err)
	}
	p, err := Open(dir, OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	f, err := p.Encode("a photo of a cat")
	if err != nil {
		b.Fatal(err)
	}
	C, h, w := p.LatentShape(256, 256)
	lat := make([]float32, C*h*w)
	for i := range lat {
		lat[i] = float32(i%7) * 0.1
	}
	b.ResetTimer()
	for b.Loop() {
		v, err := p.DiT.Forward(lat, h, w, 0.5, f.Data, f.Rows)
		if err != nil {
			b.Fatal(err)
		}
		Step(lat, v, 0.6, 0.5)
	}
}

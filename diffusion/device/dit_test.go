package device

import (
	"github.com/cortiq/cortiq/cpu/kernel"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

// TestDiTRunner: the device blocks of the tiny Z-Image transformer give
// diffusers' forward within the device tolerance, and with the VAE also on
// the device the whole pipeline gives diffusers' image (PSNR ≥ 60 dB).
func TestDiTRunner(t *testing.T) {
	d, p, ref := tinyPipeline(t)
	spec, err := p.DiT.Spec()
	if err != nil {
		t.Fatal(err)
	}
	run, err := NewDiTRunner(d, spec, DiTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	f := refTransformer(t, ref)
	maxDiff := func(a, b []float32) float64 {
		if len(a) != len(b) {
			return math.Inf(1)
		}
		m := 0.0
		for i := range a {
			m = max(m, math.Abs(float64(a[i]-b[i])))
		}
		return m
	}
	p.DiT.SetDevice(run)
	for _, sfx := range []string{"", "2"} {
		x, _ := f.Float32s("x" + sfx)
		tt, _ := f.Float32s("t" + sfx)
		cap, _ := f.Float32s("cap_feats" + sfx)
		want, _ := f.Float32s("out" + sfx)
		xi, _ := f.Info("x" + sfx)
		ci, _ := f.Info("cap_feats" + sfx)
		got, err := p.DiT.Forward(x, xi.Shape[2], xi.Shape[3], tt[0], cap, ci.Shape[0])
		if err != nil {
			t.Fatal(err)
		}
		d := maxDiff(got, want)
		t.Logf("device forward %q (%d caption rows): max |diff| %.3g", sfx, ci.Shape[0], d)
		if d > 2e-3 {
			t.Errorf("device forward %q: max |diff| %.3g > 2e-3", sfx, d)
		}
	}

	vspec, err := p.VAE.Spec()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewVAEDecoder(d, vspec, VAEOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	p.SetDecoder(dec)
	pf, err := safetensors.Open(filepath.Join(ref, "ref_pipeline.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.Metadata()
	lat, _ := pf.Float32s("latents")
	want, _ := pf.Float32s("cfg_image")
	res, err := p.Generate(diffusion.Options{Prompt: md["prompt"], Negative: md["negative"], Width: 96, Height: 64,
		Steps: 5, Guidance: 2.5, Latents: lat})
	if err != nil {
		t.Fatal(err)
	}
	var se float64
	for i := range want {
		e := float64(res.Image[i] - want[i])
		se += e * e
	}
	psnr := 10 * math.Log10(float64(len(want))/se)
	t.Logf("pipeline on the device (CFG): PSNR %.1f dB", psnr)
	if psnr < 60 {
		t.Errorf("pipeline on the device: PSNR %.1f dB < 60", psnr)
	}
}

// TestDiTRunnerCodecs: with the block matrices stored as q8_0 or q4_0 on
// the device, a forward equals the CPU's with the same quantization
// (OpenOptions.DiTQuant) within the device tolerance.
func TestDiTRunnerCodecs(t *testing.T) {
	// The device computes float32 math on the dequantized weights: compare
	// with the CPU's exact kernels, not its int8 activations.
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	ref := filepath.Join("..", "testdata", "zimage")
	model := filepath.Join(ref, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(model, "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s: %v", model, err)
	}
	d := testDevice(t)
	f := refTransformer(t, ref)
	x, _ := f.Float32s("x")
	tt, _ := f.Float32s("t")
	cap, _ := f.Float32s("cap_feats")
	xi, _ := f.Info("x")
	ci, _ := f.Info("cap_feats")
	for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
		cpu, err := diffusion.Open(model, diffusion.OpenOptions{DiTQuant: c.String()})
		if err != nil {
			t.Fatal(err)
		}
		want, err := cpu.DiT.Forward(x, xi.Shape[2], xi.Shape[3], tt[0], cap, ci.Shape[0])
		if err != nil {
			t.Fatal(err)
		}
		cpu.Close()
		// The same quantized pipeline: its modulation vectors (computed on
		// the CPU) use the quantized adaLN weights too, and re-encoding the
		// decoded blocks gives the same blocks.
		p, err := diffusion.Open(model, diffusion.OpenOptions{DiTQuant: c.String()})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := p.DiT.Spec()
		if err != nil {
			t.Fatal(err)
		}
		run, err := NewDiTRunner(d, spec, DiTOptions{Codec: c})
		if err != nil {
			t.Fatal(err)
		}
		p.DiT.SetDevice(run)
		got, err := p.DiT.Forward(x, xi.Shape[2], xi.Shape[3], tt[0], cap, ci.Shape[0])
		run.Close()
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		m := 0.0
		for i := range want {
			m = max(m, math.Abs(float64(got[i]-want[i])))
		}
		t.Logf("%s blocks on the device vs the CPU's %s: max |diff| %.3g", c, c, m)
		if m > 2e-3 {
			t.Errorf("%s: max |diff| %.3g > 2e-3", c, m)
		}
	}
}

// seqOnly hides a runner's RunBatch: the pipeline runs the guidance
// passes one after the other.
type seqOnly struct{ diffusion.DiTDevice }

// countBatch counts RunBatch calls.
type countBatch struct {
	*DiTRunner
	n int
}

func (c *countBatch) RunBatch(ins []*diffusion.DiTInput) ([][]float32, error) {
	c.n++
	return c.DiTRunner.RunBatch(ins)
}

// TestDiTRunnerBatch: classifier-free guidance's two passes (captions of
// different lengths) as one batch on the device give the sequential
// passes' outputs bit for bit, and the CPU's within the device tolerance;
// a whole guided generation gives the same image either way.
func TestDiTRunnerBatch(t *testing.T) {
	d, p, ref := tinyPipeline(t)
	spec, err := p.DiT.Spec()
	if err != nil {
		t.Fatal(err)
	}
	run, err := NewDiTRunner(d, spec, DiTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	f := refTransformer(t, ref)
	x, _ := f.Float32s("x")
	tt, _ := f.Float32s("t")
	cap1, _ := f.Float32s("cap_feats")
	cap2, _ := f.Float32s("cap_feats2")
	xi, _ := f.Info("x")
	c1, _ := f.Info("cap_feats")
	c2, _ := f.Info("cap_feats2")
	H, W := xi.Shape[2], xi.Shape[3]
	caps, rows := [][]float32{cap1, cap2}, []int{c1.Shape[0], c2.Shape[0]}
	forward := func(dev diffusion.DiTDevice) [][]float32 {
		p.DiT.SetDevice(dev)
		ys, err := p.DiT.ForwardBatch(x, H, W, tt[0], caps, rows)
		if err != nil {
			t.Fatal(err)
		}
		return ys
	}
	cb := &countBatch{DiTRunner: run}
	batch := forward(cb)
	if cb.n != 1 {
		t.Fatalf("%d RunBatch calls for one batched forward, want 1", cb.n)
	}
	seq := forward(seqOnly{run})
	// A batch over DiTOptions.BatchBytes runs as one submission per input.
	small, err := NewDiTRunner(d, spec, DiTOptions{BatchBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	split := forward(small)
	cpu := forward(nil)
	for i := range batch {
		for j := range batch[i] {
			if math.Float32bits(batch[i][j]) != math.Float32bits(seq[i][j]) || math.Float32bits(split[i][j]) != math.Float32bits(seq[i][j]) {
				t.Fatalf("caption %d (%d rows): value %d batched %g, split %g, sequential %g", i, rows[i], j, batch[i][j], split[i][j], seq[i][j])
			}
		}
		m := 0.0
		for j := range batch[i] {
			m = max(m, math.Abs(float64(batch[i][j]-cpu[i][j])))
		}
		t.Logf("caption %d (%d rows): batched = sequential; max |diff| %.3g vs the CPU", i, rows[i], m)
		if m > 2e-3 {
			t.Errorf("caption %d: max |diff| %.3g vs the CPU > 2e-3", i, m)
		}
	}

	pf, err := safetensors.Open(filepath.Join(ref, "ref_pipeline.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.Metadata()
	lat, _ := pf.Float32s("latents")
	gen := func(dev diffusion.DiTDevice) []float32 {
		p.DiT.SetDevice(dev)
		res, err := p.Generate(diffusion.Options{Prompt: md["prompt"], Negative: md["negative"], Width: 96, Height: 64,
			Steps: 2, Guidance: 2.5, Latents: lat})
		if err != nil {
			t.Fatal(err)
		}
		return res.Image
	}
	cb.n = 0
	a, b := gen(cb), gen(seqOnly{run})
	if cb.n != 2 {
		t.Errorf("%d RunBatch calls for 2 guided steps, want 2", cb.n)
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("guided image: value %d batched %g, sequential %g", i, a[i], b[i])
		}
	}
}

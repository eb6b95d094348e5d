package cudadev

import (
	flagpkg "flag"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/safetensors"
)

// moduleFile is a kernel image to load instead of kernels.Image (a cubin of
// dit.cu for the GPU loads in a fraction of the PTX's JIT time):
//
//	nvcc -O3 -std=c++17 -cubin -arch=sm_90 -o dit.cubin cuda/kernels/dit.cu
var moduleFile = flagpkg.String("cudadev.module", "", "kernel image to load (empty: the embedded PTX)")

var (
	devOnce sync.Once
	devCtx  *driver.Context
	devErr  error
)

// cudaDevice opens CUDA device 0 once for the test binary, or skips
// naming the reason (no driver, no device).
func cudaDevice(t testing.TB) driver.Device {
	t.Helper()
	devOnce.Do(func() { devCtx, devErr = driver.Open(0) })
	if devErr != nil {
		t.Skipf("no CUDA device: %v", devErr)
	}
	return devCtx
}

func testOptions(t testing.TB) DiTOptions {
	var o DiTOptions
	if *moduleFile != "" {
		b, err := os.ReadFile(*moduleFile)
		if err != nil {
			t.Fatal(err)
		}
		o.Module = b
	}
	return o
}

// tinyModel opens the tiny Z-Image reference model, or skips.
func tinyModel(t testing.TB) (*diffusion.Pipeline, string) {
	t.Helper()
	ref := filepath.Join("..", "testdata", "zimage")
	model := filepath.Join(ref, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(model, "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s: %v", model, err)
	}
	p, err := diffusion.Open(model, diffusion.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, ref
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// TestDiTRunner: on the GPU, the tiny transformer's forward equals the
// float32 model of the kernels' f16 rounding within the device tolerance
// (its distance to diffusers is logged: the model's, see
// TestPrecisionModel), the captured graph equals launching the kernels
// one by one bit for bit, and the whole guided pipeline with the
// transformer on the GPU gives diffusers' image (PSNR ≥ 60 dB).
func TestDiTRunner(t *testing.T) {
	p, ref := tinyModel(t)
	dev := cudaDevice(t)
	spec, err := p.DiT.Spec()
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t)
	run, err := NewDiTRunner(dev, spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	opts.NoGraph = true
	direct, err := NewDiTRunner(dev, spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	f, err := safetensors.Open(filepath.Join(ref, "ref_transformer.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, sfx := range []string{"", "2"} {
		fwd := func(dev diffusion.DiTDevice) []float32 { return refForward(t, p, f, sfx, dev) }
		want, _ := f.Float32s("out" + sfx)
		ci, _ := f.Info("cap_feats" + sfx)
		model := fwd(emu{spec, f16, nil})
		got := fwd(run)
		again := fwd(run) // the captured graph replayed
		one := fwd(direct)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(one[i]) || math.Float32bits(got[i]) != math.Float32bits(again[i]) {
				t.Fatalf("forward %q: value %d graph %g, replayed %g, launched one by one %g", sfx, i, got[i], again[i], one[i])
			}
		}
		dm, dr := maxDiff(got, model), maxDiff(got, want)
		t.Logf("forward %q (%d caption rows): max |diff| %.3g vs the f16 model, %.3g vs diffusers (the model's own: %.3g)",
			sfx, ci.Shape[0], dm, dr, maxDiff(model, want))
		if dm > 2e-3 {
			t.Errorf("forward %q: max |diff| %.3g vs the f16 model > 2e-3", sfx, dm)
		}
	}

	psnr := guidedPSNR(t, p, ref, run)
	t.Logf("pipeline with the transformer on the GPU (CFG): PSNR %.1f dB", psnr)
	if psnr < 60 {
		t.Errorf("pipeline: PSNR %.1f dB < 60", psnr)
	}
}

// guidedPSNR runs diffusers' reference generation (guided, its initial
// noise) with the transformer's blocks on dev and returns the image's PSNR
// against diffusers'.
func guidedPSNR(t testing.TB, p *diffusion.Pipeline, ref string, dev diffusion.DiTDevice) float64 {
	t.Helper()
	pf, err := safetensors.Open(filepath.Join(ref, "ref_pipeline.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.Metadata()
	lat, _ := pf.Float32s("latents")
	want, _ := pf.Float32s("cfg_image")
	p.DiT.SetDevice(dev)
	defer p.DiT.SetDevice(nil)
	res, err := p.Generate(diffusion.Options{Prompt: md["prompt"], Negative: md["negative"], Width: 96, Height: 64,
		Steps: 5, Guidance: 2.5, Latents: lat})
	if err != nil {
		t.Fatal(err)
	}
	return psnrOf(res.Image, want)
}

// refForward is the transformer's forward with its blocks on dev (nil:
// the CPU) for the inputs of diffusers' reference forward sfx in f.
func refForward(t testing.TB, p *diffusion.Pipeline, f *safetensors.File, sfx string, dev diffusion.DiTDevice) []float32 {
	t.Helper()
	x, _ := f.Float32s("x" + sfx)
	tt, _ := f.Float32s("t" + sfx)
	cap, _ := f.Float32s("cap_feats" + sfx)
	xi, _ := f.Info("x" + sfx)
	ci, _ := f.Info("cap_feats" + sfx)
	p.DiT.SetDevice(dev)
	defer p.DiT.SetDevice(nil)
	y, err := p.DiT.Forward(x, xi.Shape[2], xi.Shape[3], tt[0], cap, ci.Shape[0])
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func psnrOf(got, want []float32) float64 {
	var se float64
	for i := range want {
		e := float64(got[i] - want[i])
		se += e * e
	}
	return 10 * math.Log10(float64(len(want))/se)
}

// TestDiTRunnerFake: without a GPU, the runner uploads, captures a step
// and replays it on the fake device (kernels compute nothing): the host
// side's sizes and launch sequence, and a refusal for a head dimension
// the kernels lack.
func TestDiTRunnerFake(t *testing.T) {
	p, ref := tinyModel(t)
	spec, err := p.DiT.Spec()
	if err != nil {
		t.Fatal(err)
	}
	dev := driver.NewFake(1 << 30)
	run, err := NewDiTRunner(dev, spec, DiTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	f, err := safetensors.Open(filepath.Join(ref, "ref_transformer.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, _ := f.Float32s("x")
	for range 2 {
		if y := refForward(t, p, f, "", run); len(y) != len(x) {
			t.Fatalf("output of %d values, want %d", len(y), len(x))
		}
	}
	if n := len(run.recs); n != 1 {
		t.Errorf("%d recorded layouts after two forwards of one shape, want 1", n)
	}
	for _, d := range run.recs {
		// 9 launches a block, 8 for the layers after the first (the
		// previous layer wrote their first norm), then the final norm and
		// product.
		want := 9*(len(spec.NoiseRefiner)+len(spec.ContextRefiner)+len(spec.Layers)) - (len(spec.Layers) - 1) + 2
		if d.launches != want {
			t.Errorf("%d launches a step, want %d", d.launches, want)
		}
	}
	bad := *spec
	bad.HeadDim, bad.Heads = 16, spec.Dim/16
	if _, err := NewDiTRunner(dev, &bad, DiTOptions{}); err == nil {
		t.Error("head dim 16: no error")
	} else {
		t.Logf("head dim 16: %v", err)
	}
}

package device

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/safetensors"
)

// TestVAEDecoder: the device decoder of the tiny Z-Image VAE equals the
// CPU reference and diffusers' decode within the device tolerance.
func TestVAEDecoder(t *testing.T) {
	ref := filepath.Join("..", "testdata", "zimage")
	model := filepath.Join(ref, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(model, "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s: %v", model, err)
	}
	d := testDevice(t)
	p, err := diffusion.Open(model, diffusion.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	spec, err := p.VAE.Spec()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewVAEDecoder(d, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	f, err := safetensors.Open(filepath.Join(ref, "ref_vae.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, _ := f.Float32s("latents")
	want, _ := f.Float32s("decoded")
	info, _ := f.Info("latents")
	h, w := info.Shape[2], info.Shape[3]
	got, err := dec.Decode(z, h, w)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := p.VAE.Decode(z, h, w)
	if err != nil {
		t.Fatal(err)
	}
	diff := func(a, b []float32) float64 {
		m := 0.0
		for i := range a {
			m = max(m, math.Abs(float64(a[i]-b[i])))
		}
		return m
	}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	dr, dc := diff(got, want), diff(got, cpu)
	t.Logf("device decode %dx%d latents: max |diff| %.3g vs diffusers, %.3g vs the CPU", w, h, dr, dc)
	if dr > 2e-3 || dc > 2e-3 {
		t.Errorf("device decode: max |diff| %.3g vs diffusers, %.3g vs the CPU (tolerance 2e-3)", dr, dc)
	}
}

package device

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/safetensors"
)

// TestVAEDecoder: the device decoder of the tiny Z-Image VAE equals the
// CPU reference and diffusers' decode within the device tolerance.
func TestVAEDecoder(t *testing.T) {
	d, p, ref := tinyPipeline(t)
	spec, err := p.VAE.Spec()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewVAEDecoder(d, spec, VAEOptions{})
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

// TestVAEDecoderTiled: with bindings capped far below the activations (as
// a browser's 128 MiB caps a 1024² decode) the decoder runs in bands of
// rows, and its image is the untiled one bit for bit; a cap the global
// mid attention cannot fit under is a clear error.
func TestVAEDecoderTiled(t *testing.T) {
	d, p, ref := tinyPipeline(t)
	spec, err := p.VAE.Spec()
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(ref, "ref_vae.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, _ := f.Float32s("latents")
	info, _ := f.Info("latents")
	h, w := info.Shape[2], info.Shape[3]
	decode := func(limit uint64) ([]float32, error) {
		dec, err := NewVAEDecoder(d, spec, VAEOptions{MaxBinding: limit})
		if err != nil {
			t.Fatal(err)
		}
		defer dec.Close()
		return dec.Decode(z, h, w)
	}
	whole, err := decode(0)
	if err != nil {
		t.Fatal(err)
	}
	// The largest activation is 64×96 pixels × 16 channels (393 KiB); a
	// 3×3 convolution over it reads 3 rows of 6 KiB, the mid attention
	// 8×12 pixels × 24 channels (9 KiB) whole. 18.5 KiB: one output row
	// per chunk at the widest layers, bands of 1 to 6 rows; the others
	// cut bands at rows that do not divide the image.
	for _, limit := range []uint64{18500, 50000, 150000} {
		got, err := decode(limit)
		if err != nil {
			t.Fatalf("bindings of at most %d bytes: %v", limit, err)
		}
		if len(got) != len(whole) {
			t.Fatalf("bindings of at most %d bytes: %d values, want %d", limit, len(got), len(whole))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(whole[i]) {
				t.Fatalf("bindings of at most %d bytes: value %d is %g, untiled %g", limit, i, got[i], whole[i])
			}
		}
	}
	// 18000 bytes: under the 3 rows a convolution reads; 8 KiB: under the
	// mid attention's 9 KiB.
	for _, limit := range []uint64{18000, 8192} {
		if _, err := decode(limit); err == nil || !strings.Contains(err.Error(), "binding limit") {
			t.Errorf("bindings of at most %d bytes: err %v, want a binding-limit error", limit, err)
		} else {
			t.Logf("bindings of at most %d bytes: %v", limit, err)
		}
	}
}

package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/safetensors"
)

// TestTextEncoderDevice: with the text encoder's feature layers on the
// device (what cortiq imagine --backend webgpu sets up) the caption
// features equal transformers' hidden_states[-2] and the CPU's within the
// device tolerance.
func TestTextEncoderDevice(t *testing.T) {
	ref := filepath.Join("..", "..", "diffusion", "testdata", "zimage")
	model := filepath.Join(ref, "zimage-tiny")
	if _, err := os.Stat(filepath.Join(model, "model_index.json")); err != nil {
		t.Skipf("reference model not found at %s: %v", model, err)
	}
	dev, err := gpu.Open(gpu.Options{})
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	defer dev.Close()
	p, err := diffusion.Open(model, diffusion.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rf, err := safetensors.Open(filepath.Join(ref, "ref_text_encoder.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	md := rf.Metadata()
	var opened []func()
	defer func() {
		for _, f := range opened {
			f()
		}
	}()
	keys := []string{"prompt", "negative"}
	cpus := map[string]diffusion.Features{}
	for _, key := range keys {
		if cpus[key], err = p.Encode(md[key+"_text"]); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := textEncoderDevice(p.TextEncoder, dev, &opened)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
	for _, key := range keys {
		want, err := rf.Float32s(key + "_embeds")
		if err != nil {
			t.Fatalf("no %s features in the reference: %v", key, err)
		}
		cpu := cpus[key]
		got, err := p.Encode(md[key+"_text"])
		if err != nil {
			t.Fatal(err)
		}
		if got.Rows != cpu.Rows || len(got.Data) != len(want) {
			t.Fatalf("%s: %d rows (%d values) on the device, %d on the CPU, %d values in the reference", key, got.Rows, len(got.Data), cpu.Rows, len(want))
		}
		dr, dc := 0.0, 0.0
		for i := range want {
			dr = max(dr, math.Abs(float64(got.Data[i]-want[i])))
			dc = max(dc, math.Abs(float64(got.Data[i]-cpu.Data[i])))
		}
		t.Logf("%s (%d tokens): device features max |diff| %.3g vs transformers, %.3g vs the CPU", key, got.Rows, dr, dc)
		if dr > 2e-3 || dc > 2e-3 {
			t.Errorf("%s: device features max |diff| %.3g vs transformers, %.3g vs the CPU (> 2e-3)", key, dr, dc)
		}
	}
}

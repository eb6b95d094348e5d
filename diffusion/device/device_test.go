package device

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/safetensors"
)

var (
	sharedOnce sync.Once
	sharedDev  *gpu.Device
	sharedErr  error
)

// testDevice opens one device for the whole test binary, or skips.
func testDevice(t testing.TB) *gpu.Device {
	t.Helper()
	sharedOnce.Do(func() { sharedDev, sharedErr = gpu.Open(gpu.Options{}) })
	if sharedErr != nil {
		if errors.Is(sharedErr, gpu.ErrNoAdapter) {
			t.Skipf("no WebGPU adapter (install a Vulkan driver, e.g. mesa-vulkan-drivers for lavapipe): %v", sharedErr)
		}
		t.Fatalf("open device: %v", sharedErr)
	}
	return sharedDev
}

// tinyPipeline opens the device and the tiny Z-Image reference model
// (closed when t ends), or skips when the model is not there; ref is the
// folder holding the model and diffusers' reference outputs.
func tinyPipeline(t testing.TB) (*gpu.Device, *diffusion.Pipeline, string) {
	t.Helper()
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
	t.Cleanup(func() { p.Close() })
	return d, p, ref
}

// refTransformer opens ref's ref_transformer.safetensors (diffusers'
// inputs and outputs of one transformer forward), closed when t ends.
func refTransformer(t testing.TB, ref string) *safetensors.File {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(ref, "ref_transformer.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

package webgpu

import (
	"errors"
	"sync"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
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

// testSession builds a backend for m with opts and one session of maxLen
// positions, both closed when the test ends.
func testSession(t testing.TB, m *model.Model, opts Options, maxLen int) (*Backend, *Session) {
	t.Helper()
	b, err := New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := b.newSession(maxLen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return b, s
}

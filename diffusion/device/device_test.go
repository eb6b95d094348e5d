package device

import (
	"errors"
	"sync"
	"testing"

	"github.com/cortiq/cortiq/gpu"
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

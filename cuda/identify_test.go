package cuda_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/model"
)

// TestIdentify: the registered Identifier names the device as the opened
// backend's Name without opening it (no context: OpenDevice is not
// called), refuses what Open refuses before the device, fails without a
// driver as Open does, and leaves layer ranges to Open.
func TestIdentify(t *testing.T) {
	ctx := context.Background()
	m := synthModel(t, "f32")
	if _, err := driver.DeviceInfo(0); err != nil {
		// CPU-only (CI): Identify says what Open says.
		_, openErr := backend.Open(ctx, "cuda", m, backend.Options{})
		if _, err := backend.Identify(ctx, "cuda", m, backend.Options{}); !errors.Is(err, driver.ErrNoDriver) && (openErr == nil || err.Error() != openErr.Error()) {
			t.Errorf("Identify without a device: %v; Open: %v", err, openErr)
		}
	}
	fake := driver.NewFake(1 << 30)
	oldInfo, oldOpen := cuda.DeviceInfo, cuda.OpenDevice
	opened := 0
	cuda.DeviceInfo = func(o int) (driver.Info, error) { i := fake.Info(); i.Ordinal = o; return i, nil }
	cuda.OpenDevice = func(int) (driver.Device, error) { opened++; return fake, nil }
	t.Cleanup(func() { cuda.DeviceInfo, cuda.OpenDevice = oldInfo, oldOpen })

	name, err := backend.Identify(ctx, "cuda", m, backend.Options{})
	if err != nil || opened != 0 {
		t.Fatalf("Identify: %q, %v (%d devices opened)", name, err, opened)
	}
	b, err := backend.Open(ctx, "cuda", m, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Name() != name || opened != 1 {
		t.Errorf("Identify %q, the opened backend's Name %q", name, b.Name())
	}
	if _, err := backend.Identify(ctx, "cuda", m, backend.Options{Layers: "0:0-0"}); !errors.Is(err, backend.ErrUnidentified) {
		t.Errorf("Identify with layer ranges: %v, want ErrUnidentified", err)
	}
	bad := *m
	bad.Arch.Act = model.ActSwiGLUOAI
	_, openErr := backend.Open(ctx, "cuda", &bad, backend.Options{})
	if _, err := backend.Identify(ctx, "cuda", &bad, backend.Options{}); !errors.Is(err, cuda.ErrUnsupported) || openErr == nil || err.Error() != openErr.Error() {
		t.Errorf("Identify of a refused model: %v; Open: %v", err, openErr)
	}
}

package webgpu

import (
	"errors"
	"sync"
	"testing"

	"github.com/cortiq/cortiq/model"
)

var (
	sharedOnce sync.Once
	sharedDev  *Device
	sharedErr  error
)

// testDevice opens one device for the whole test binary, or skips.
func testDevice(t testing.TB) *Device {
	t.Helper()
	sharedOnce.Do(func() { sharedDev, sharedErr = Open() })
	if sharedErr != nil {
		if errors.Is(sharedErr, ErrNoAdapter) {
			t.Skipf("no WebGPU adapter (install a Vulkan driver, e.g. mesa-vulkan-drivers for lavapipe): %v", sharedErr)
		}
		t.Fatalf("open device: %v", sharedErr)
	}
	return sharedDev
}

func TestOpen(t *testing.T) {
	d := testDevice(t)
	info := d.Info()
	t.Logf("adapter %+v maxBuffer %d maxBinding %d", info, d.Limits().MaxBufferSize, d.Limits().MaxStorageBufferBindingSize)
	b, err := d.NewStorage("t", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	want := []float32{1, 2, 3, 4.5}
	if err := d.Write(b, 16, F32Bytes(want)); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadBuffer(b, 32)
	if err != nil {
		t.Fatal(err)
	}
	g := BytesF32(got)
	for i, w := range want {
		if g[4+i] != w {
			t.Fatalf("readback %v, want %v at 4..", g, want)
		}
	}
	if err := d.Write(b, 60, make([]byte, 8)); err == nil {
		t.Fatal("overflowing write accepted")
	}
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

//go:build !js

package webgpu

import (
	"fmt"
	"strings"
	"math"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
)

// openDevice acquires the best adapter and a device with its full limits.
var openDevice = openNative

func openNative() (*Device, error) {
	wgpu.SetLogLevel(wgpu.LogLevelOff)
	inst := wgpu.CreateInstance(nil)
	if inst == nil {
		return nil, ErrNoAdapter
	}
	ad, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || ad == nil {
		inst.Release()
		if err == nil {
			err = ErrNoAdapter
		}
		return nil, fmt.Errorf("%w: %v", ErrNoAdapter, err)
	}
	ai := ad.GetInfo()
	lim := ad.GetLimits().Limits
	// NVIDIA reports u64-max as maxBufferSize; passing it back makes wgpu
	// fall back to the 256 MiB default, so ask for one less.
	if lim.MaxBufferSize == math.MaxUint64 {
		lim.MaxBufferSize = math.MaxUint64 - 1
	}
	// The binding reads the push-constant limit from an uninitialized
	// extras struct (garbage); we use no push constants, so ask for none.
	lim.MaxPushConstantSize = 0
	d := &Device{
		info: AdapterInfo{
			Name:    adapterName(ai),
			Vendor:  ai.VendorName,
			Driver:  ai.DriverDescription,
			Backend: ai.BackendType.String(),
			Type:    ai.AdapterType.String(),
		},
	}
	dev, err := ad.RequestDevice(&wgpu.DeviceDescriptor{
		Label:          "cortiq",
		RequiredLimits: &wgpu.RequiredLimits{Limits: lim},
		// No DeviceLostCallback: the binding (v0.23.0) stores a Go pointer
		// in C-visible memory for it and panics under the default cgocheck.
		// A lost device surfaces instead as failing calls, a failed map or
		// the readback timeout, each of which marks the Device lost.
	})
	if err != nil {
		ad.Release()
		inst.Release()
		return nil, fmt.Errorf("webgpu: request device on %q: %w", ai.Name, err)
	}
	d.dev = dev
	d.queue = dev.GetQueue()
	d.limits = dev.GetLimits().Limits
	d.release = func() {
		d.queue.Release()
		dev.Release()
		ad.Release()
		inst.Release()
	}
	return d, nil
}

// readbackTimeout bounds a wait for the device; a hung device reads as lost.
const readbackTimeout = 60 * time.Second

func (d *Device) mapRead(b *Buffer, n uint64) ([]byte, error) {
	done := false
	var status wgpu.BufferMapAsyncStatus
	if err := b.b.MapAsync(wgpu.MapModeRead, 0, n, func(s wgpu.BufferMapAsyncStatus) {
		status = s
		done = true
	}); err != nil {
		return nil, fmt.Errorf("webgpu: map: %w", err)
	}
	deadline := time.Now().Add(readbackTimeout)
	for !done {
		d.dev.Poll(true, nil)
		if err := d.Err(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			d.markLost("readback timed out")
			return nil, d.Err()
		}
	}
	if status != wgpu.BufferMapAsyncStatusSuccess {
		return nil, fmt.Errorf("webgpu: map failed: %s", status)
	}
	out := make([]byte, n)
	copy(out, b.b.GetMappedRange(0, uint(n)))
	if err := b.b.Unmap(); err != nil {
		return nil, fmt.Errorf("webgpu: unmap: %w", err)
	}
	return out, nil
}

// adapterName picks a readable adapter name. The binding's AdapterInfo
// fields are shifted against this wgpu-native build (Name reads "0x0" and
// the device name lands in DriverDescription), so take the first field that
// looks like a name.
func adapterName(ai wgpu.AdapterInfo) string {
	for _, s := range []string{ai.Name, ai.DriverDescription, ai.Architecture, ai.VendorName} {
		if s != "" && !strings.HasPrefix(s, "0x") {
			return s
		}
	}
	return "unknown"
}

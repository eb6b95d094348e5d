//go:build !js

package gpu

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
)

// openDevice acquires the best adapter and a device with its full limits.
var openDevice = openNative

func openNative(opts Options) (*Device, error) {
	inst, ad, err := requestAdapter()
	if err != nil {
		return nil, err
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
	d := &Device{info: adapterInfo(ai)}
	dev, err := ad.RequestDevice(&wgpu.DeviceDescriptor{
		Label:            "cortiq",
		RequiredLimits:   &wgpu.RequiredLimits{Limits: lim},
		RequiredFeatures: profileFeatures(ad, opts.Profile),
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
	probe, err := dev.CreateBuffer(&wgpu.BufferDescriptor{Size: 256, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
	if err == nil {
		err = checkRawBuffer(probe)
		probe.Release()
	}
	if err != nil {
		d.queue.Release()
		dev.Release()
		ad.Release()
		inst.Release()
		return nil, err
	}
	d.release = func() {
		d.queue.Release()
		dev.Release()
		ad.Release()
		inst.Release()
	}
	if len(profileFeatures(ad, opts.Profile)) > 0 {
		if err := d.startProfiler(); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// requestAdapter acquires the adapter Open uses (the instance must be
// released with it), or says why there is none.
func requestAdapter() (*wgpu.Instance, *wgpu.Adapter, error) {
	wgpu.SetLogLevel(wgpu.LogLevelOff)
	inst := wgpu.CreateInstance(nil)
	if inst == nil {
		return nil, nil, ErrNoAdapter
	}
	ad, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || ad == nil {
		inst.Release()
		if err == nil {
			err = ErrNoAdapter
		}
		return nil, nil, fmt.Errorf("%w: %v", ErrNoAdapter, err)
	}
	return inst, ad, nil
}

func adapterInfo(ai wgpu.AdapterInfo) AdapterInfo {
	return AdapterInfo{
		Name:    adapterName(ai),
		Vendor:  ai.VendorName,
		Driver:  ai.DriverDescription,
		Backend: ai.BackendType.String(),
		Type:    ai.AdapterType.String(),
	}
}

// describeAdapter is Adapter natively: the adapter is requested, read and
// released; no device is created.
var describeAdapter = func() (AdapterInfo, wgpu.Limits, error) {
	inst, ad, err := requestAdapter()
	if err != nil {
		return AdapterInfo{}, wgpu.Limits{}, err
	}
	info, lim := adapterInfo(ad.GetInfo()), ad.GetLimits().Limits
	ad.Release()
	inst.Release()
	return info, lim, nil
}

// readbackTimeout bounds a wait for the device; a hung device reads as lost.
const readbackTimeout = 60 * time.Second

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

func (d *Device) writeBuffer(b *Buffer, off uint64, data []byte) error {
	return d.queue.WriteBuffer(b.b, off, data)
}

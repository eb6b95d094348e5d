//go:build js

package gpu

import (
	"errors"
	"fmt"
	"syscall/js"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// AcquireJS is the seam where the browser build supplies its device: it
// returns a ready device and its queue (navigator.gpu.requestAdapter and
// requestDevice with the adapter's limits, done by the browser host), plus a
// description of the adapter. Until it is set, New fails with ErrNoAdapter
// and the engine runs on the CPU.
var AcquireJS func() (*wgpu.Device, AdapterInfo, error)

// describeAdapter is Adapter in the browser: the device comes whole from
// AcquireJS, so the adapter is not described apart from it.
var describeAdapter = func() (AdapterInfo, wgpu.Limits, error) { return AdapterInfo{}, wgpu.Limits{}, ErrNoInfo }

var openDevice = func(Options) (*Device, error) {
	if AcquireJS == nil {
		return nil, fmt.Errorf("%w: browser device acquisition not wired", ErrNoAdapter)
	}
	dev, info, err := AcquireJS()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoAdapter, err)
	}
	d := &Device{dev: dev, queue: dev.GetQueue(), info: info, limits: dev.GetLimits().Limits}
	return d, nil
}

func (d *Device) mapRead(b *Buffer, dst []byte) error {
	n := uint64(len(dst))
	ok := false
	if err := b.b.MapAsync(wgpu.MapModeRead, 0, n, func(s wgpu.BufferMapAsyncStatus) {
		ok = s == wgpu.BufferMapAsyncStatusSuccess
	}); err != nil {
		return fmt.Errorf("webgpu: map: %w", err)
	}
	if !ok {
		return errors.New("webgpu: map failed")
	}
	copy(dst, b.b.GetMappedRange(0, uint(n)))
	b.b.Unmap()
	return nil
}

// wait is a no-op in the browser: the queue drains on its own and a map
// awaits the work before it.
func (d *Device) wait() {}

// writeBuffer copies data into a JS-owned array first. The binding's
// WriteBuffer passes a view of the wasm memory, and the Go allocations made
// while the call's arguments are converted can grow that memory, which
// detaches the view: the browser then sees a zero-length array and rejects
// the write ("Number of bytes to write is too large"), intermittently.
func (d *Device) writeBuffer(b *Buffer, off uint64, data []byte) error {
	arr := js.Global().Get("Uint8Array").New(len(data))
	js.CopyBytesToJS(arr, data)
	// The js build's wgpu.Queue and wgpu.Buffer each hold exactly one
	// js.Value (checked by TestJSHandleLayout); the binding does not export it.
	q := *(*js.Value)(unsafe.Pointer(d.queue))
	buf := *(*js.Value)(unsafe.Pointer(b.b))
	q.Call("writeBuffer", buf, float64(off), arr)
	return nil
}

// ProfileReport is empty in the browser: no timestamp queries.
func (d *Device) ProfileReport() string { return "" }

func (d *Device) runProfiled(pre []Copy, ds []Dispatch, post []Copy) error {
	return d.Run(pre, ds, post)
}

type profiler struct{}

func (d *Device) stopProfiler() {}

// ProfileReport is empty in the browser: no timestamp queries.
func ProfileReport() string { return "" }

//go:build js

package main

import (
	"errors"
	"fmt"
	"sync"
	"syscall/js"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/cortiq/cortiq/gpu"
)

// The browser's device, for the gpu package's AcquireJS seam. The
// adapter and device are requested by worker.js (cortiqRequestDevice):
// requestDevice with the adapter's own limits, because the binding's
// RequiredLimits is ignored in the js build and the defaults (128 MiB
// storage bindings) are too small for real models.
//
// The device is requested once per worker: every load (and the image
// pipeline) opens the webgpu package's Device over the same one.
func init() {
	gpu.AcquireJS = acquireJS
}

var acquired struct {
	once sync.Once
	done bool
	dev  *wgpu.Device
	info gpu.AdapterInfo
	err  error
}

func acquireJS() (*wgpu.Device, gpu.AdapterInfo, error) {
	acquired.once.Do(func() {
		acquired.dev, acquired.info, acquired.err = requestDevice()
		acquired.done = true
	})
	return acquired.dev, acquired.info, acquired.err
}

// adapter is what the worker's device request found (ok is false before
// the first request).
func adapter() (info gpu.AdapterInfo, err error, ok bool) {
	if !acquired.done {
		return info, nil, false
	}
	return acquired.info, acquired.err, true
}

func requestDevice() (*wgpu.Device, gpu.AdapterInfo, error) {
	var info gpu.AdapterInfo
	if !js.Global().Get("navigator").Get("gpu").Truthy() {
		return nil, info, errors.New("navigator.gpu is undefined: this browser (or its flags) exposes no WebGPU")
	}
	req := js.Global().Get("cortiqRequestDevice")
	if req.Type() != js.TypeFunction {
		return nil, info, errors.New("worker.js defines no cortiqRequestDevice")
	}
	v, err := await(req.Invoke())
	if err != nil {
		return nil, info, err
	}
	ai := v.Get("info")
	str := func(k string) string {
		x := ai.Get(k)
		if x.Type() == js.TypeString {
			return x.String()
		}
		return ""
	}
	info = gpu.AdapterInfo{
		Name:    firstNonEmpty(str("description"), str("device"), str("architecture"), str("vendor"), "browser WebGPU adapter"),
		Vendor:  str("vendor"),
		Driver:  str("architecture"),
		Backend: "browser",
		Type:    str("type"),
	}
	d := wgpu.NewDevice(v.Get("device"))
	return &d, info, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// await waits for a JS promise from an ordinary goroutine (never from a
// js.Func callback, which would block the event loop that resolves it).
func await(p js.Value) (js.Value, error) {
	if p.Type() != js.TypeObject || p.Get("then").Type() != js.TypeFunction {
		return p, nil
	}
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	var onOK, onErr js.Func
	onOK = js.FuncOf(func(this js.Value, args []js.Value) any {
		v := js.Undefined()
		if len(args) > 0 {
			v = args[0]
		}
		ch <- result{v: v}
		return nil
	})
	onErr = js.FuncOf(func(this js.Value, args []js.Value) any {
		msg := "promise rejected"
		if len(args) > 0 {
			msg = jsErrorString(args[0])
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	p.Call("then", onOK, onErr)
	r := <-ch
	onOK.Release()
	onErr.Release()
	return r.v, r.err
}

func jsErrorString(v js.Value) string {
	if v.Type() == js.TypeObject {
		if m := v.Get("message"); m.Type() == js.TypeString {
			if n := v.Get("name"); n.Type() == js.TypeString {
				return fmt.Sprintf("%s: %s", n.String(), m.String())
			}
			return m.String()
		}
	}
	return js.Global().Get("String").Invoke(v).String()
}

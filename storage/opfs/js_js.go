//go:build js

package opfs

import (
	"fmt"
	"syscall/js"

	"github.com/hack-pad/hackpadfs"
)

// domError is a JS exception (usually a DOMException) surfaced as a Go error.
type domError struct {
	name, msg string
}

func (e *domError) Error() string { return e.name + ": " + e.msg }

// Is maps DOMException names onto the portable errors callers test for.
func (e *domError) Is(target error) bool {
	switch e.name {
	case "NotFoundError":
		return target == hackpadfs.ErrNotExist
	case "NoModificationAllowedError":
		return target == ErrLocked
	case "QuotaExceededError":
		return target == ErrQuota
	case "TypeError":
		return target == hackpadfs.ErrInvalid
	case "SecurityError", "NotAllowedError":
		return target == hackpadfs.ErrPermission
	}
	return false
}

func toError(v js.Value) error {
	if v.Type() == js.TypeObject {
		name, msg := v.Get("name"), v.Get("message")
		if name.Type() == js.TypeString {
			return &domError{name: name.String(), msg: msg.String()}
		}
	}
	return &domError{name: "Error", msg: js.Global().Get("String").Invoke(v).String()}
}

// await blocks the calling goroutine until promise p settles. It must not be
// called from a js.Func callback: the JS event loop that settles p only runs
// while every goroutine is blocked.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	var onOK, onErr js.Func
	onOK = js.FuncOf(func(_ js.Value, args []js.Value) any {
		onOK.Release()
		onErr.Release()
		var v js.Value
		if len(args) > 0 {
			v = args[0]
		}
		ch <- result{v: v}
		return nil
	})
	onErr = js.FuncOf(func(_ js.Value, args []js.Value) any {
		onOK.Release()
		onErr.Release()
		var err error = &domError{name: "Error", msg: "promise rejected"}
		if len(args) > 0 {
			err = toError(args[0])
		}
		ch <- result{err: err}
		return nil
	})
	p.Call("then", onOK, onErr)
	r := <-ch
	return r.v, r.err
}

// call invokes a synchronous JS method, turning a thrown exception into an
// error instead of a Go panic.
func call(v js.Value, method string, args ...any) (res js.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = toError(je.Value)
				return
			}
			err = fmt.Errorf("opfs: %s: %v", method, r)
		}
	}()
	return v.Call(method, args...), nil
}

// awaitCall calls an async JS method and waits for its promise; a synchronous
// throw is reported like a rejection.
func awaitCall(v js.Value, method string, args ...any) (js.Value, error) {
	p, err := call(v, method, args...)
	if err != nil {
		return js.Value{}, err
	}
	return await(p)
}

func isDOM(err error, name string) bool {
	de, ok := err.(*domError)
	return ok && de.name == name
}

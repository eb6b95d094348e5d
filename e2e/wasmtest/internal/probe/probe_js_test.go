//go:build js

package probe

import (
	"fmt"
	"os"
	"syscall/js"
	"testing"
)

func await(p js.Value) (js.Value, error) {
	type res struct {
		v   js.Value
		err error
	}
	ch := make(chan res, 1)
	var ok, fail js.Func
	ok = js.FuncOf(func(this js.Value, args []js.Value) any {
		ok.Release()
		fail.Release()
		ch <- res{v: args[0]}
		return nil
	})
	fail = js.FuncOf(func(this js.Value, args []js.Value) any {
		ok.Release()
		fail.Release()
		ch <- res{err: fmt.Errorf("%s: %s", args[0].Get("name").String(), args[0].Get("message").String())}
		return nil
	})
	p.Call("then", ok, fail)
	r := <-ch
	return r.v, r.err
}

func try(f func() js.Value) (v js.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = fmt.Errorf("%s: %s", je.Value.Get("name").String(), je.Value.Get("message").String())
				return
			}
			err = fmt.Errorf("%v", r)
		}
	}()
	return f(), nil
}

func TestProbe(t *testing.T) {
	t.Logf("env X=%q args=%v", os.Getenv("X"), os.Args)
	root, err := await(js.Global().Get("navigator").Get("storage").Call("getDirectory"))
	if err != nil {
		t.Fatal(err)
	}
	opt := map[string]any{"create": true}
	d, _ := await(root.Call("getDirectoryHandle", "d", opt))
	f, err := await(d.Call("getFileHandle", "a", opt))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("createSyncAccessHandle type: %v", f.Get("createSyncAccessHandle").Type())
	h, err := await(f.Call("createSyncAccessHandle"))
	if err != nil {
		t.Fatal(err)
	}
	buf := js.Global().Get("Uint8Array").New(5)
	js.CopyBytesToJS(buf, []byte("hello"))
	n, err := try(func() js.Value { return h.Call("write", buf, map[string]any{"at": 0}) })
	t.Logf("write: %v %v", n, err)
	_, err = await(f.Call("createSyncAccessHandle"))
	t.Logf("second sync handle while open: %v", err)
	_, err = await(f.Call("createSyncAccessHandle", map[string]any{"mode": "readwrite-unsafe"}))
	t.Logf("second sync handle readwrite-unsafe while open: %v", err)
	file, err := await(f.Call("getFile"))
	if err == nil {
		t.Logf("getFile while open: size=%v lastModified=%v", file.Get("size"), file.Get("lastModified"))
	} else {
		t.Logf("getFile while open: %v", err)
	}
	_, err = await(d.Call("removeEntry", "a"))
	t.Logf("removeEntry while open: %v", err)
	_, err = await(f.Call("move", "b"))
	t.Logf("move while open: %v", err)
	h.Call("flush")
	h.Call("close")
	file, err = await(f.Call("getFile"))
	t.Logf("getFile after close: size=%v lastModified=%v err=%v", file.Get("size"), file.Get("lastModified"), err)

	t.Logf("move type: %v", f.Get("move").Type())
	_, err = await(f.Call("move", "b"))
	t.Logf("move rename: %v name now %v", err, f.Get("name"))
	// move over existing file
	g, _ := await(d.Call("getFileHandle", "c", opt))
	_, err = await(f.Call("move", "c"))
	t.Logf("move over existing file: %v", err)
	_ = g
	// move file into root
	_, err = await(f.Call("move", root, "top"))
	t.Logf("move to other dir: %v", err)
	// move file onto existing directory name
	_, err = await(root.Call("getDirectoryHandle", "dd", opt))
	_, err = await(f.Call("move", "dd"))
	t.Logf("move file onto dir name: %v", err)
	// directory move
	t.Logf("dir move type: %v", d.Get("move").Type())
	if d.Get("move").Type() == js.TypeFunction {
		_, err = await(d.Call("move", "d2"))
		t.Logf("dir move: %v", err)
		_, err = await(d.Call("move", "dd"))
		t.Logf("dir move onto existing dir: %v", err)
	}
	// list
	it := root.Call("entries")
	for {
		r, err := await(it.Call("next"))
		if err != nil || r.Get("done").Bool() {
			break
		}
		e := r.Get("value")
		t.Logf("entry %v kind %v", e.Index(0), e.Index(1).Get("kind"))
	}
	_, err = await(root.Call("getFileHandle", "dd"))
	t.Logf("getFileHandle on dir: %v", err)
	_, err = await(root.Call("getDirectoryHandle", "top"))
	t.Logf("getDirectoryHandle on file: %v", err)
	_, err = await(root.Call("getDirectoryHandle", "dd", opt))
	t.Logf("getDirectoryHandle create on existing: %v", err)
	_, err = await(root.Call("removeEntry", "nonexist"))
	t.Logf("removeEntry nonexist: %v", err)
	sub, _ := await(root.Call("getDirectoryHandle", "ne", opt))
	await(sub.Call("getFileHandle", "x", opt))
	_, err = await(root.Call("removeEntry", "ne"))
	t.Logf("removeEntry nonempty: %v", err)
	_, err = await(root.Call("getFileHandle", "bad/name", opt))
	t.Logf("slash name: %v", err)
	_, err = await(root.Call("getFileHandle", "..", opt))
	t.Logf("dotdot name: %v", err)
	est, err := await(js.Global().Get("navigator").Get("storage").Call("estimate"))
	t.Logf("estimate quota=%v usage=%v err=%v", est.Get("quota"), est.Get("usage"), err)
	t.Logf("fetch type %v", js.Global().Get("fetch").Type())
}

// TestFailWhenAsked lets the harness test check that failures propagate.
func TestFailWhenAsked(t *testing.T) {
	if os.Getenv("PROBE_FAIL") != "" {
		t.Fatal("failing as asked")
	}
}

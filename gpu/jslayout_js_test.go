//go:build js

package gpu

import (
	"reflect"
	"syscall/js"
	"testing"

	"github.com/cogentcore/webgpu/wgpu"
)

// writeBuffer reads the js.Value out of wgpu.Queue and wgpu.Buffer: both
// must stay single-field structs of a js.Value.
func TestJSHandleLayout(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeOf(wgpu.Queue{}), reflect.TypeOf(wgpu.Buffer{})} {
		if typ.NumField() != 1 || typ.Field(0).Type != reflect.TypeOf(js.Value{}) || typ.Size() != reflect.TypeOf(js.Value{}).Size() {
			t.Fatalf("%s is no longer a single js.Value: writeBuffer must change", typ)
		}
	}
}

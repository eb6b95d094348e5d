package webgpu

import (
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
)

// TestBindKindsAgree: gpu.Kinds converts the kernel table's binding kinds
// by value, so the two enumerations must keep one order.
func TestBindKindsAgree(t *testing.T) {
	got := gpu.Kinds([]shaders.Bind{shaders.Uniform, shaders.ReadOnly, shaders.ReadWrite})
	want := []gpu.BindKind{gpu.Uniform, gpu.ReadOnly, gpu.ReadWrite}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("kind %d: %d, want %d", i, got[i], want[i])
		}
	}
}

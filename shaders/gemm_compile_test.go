package shaders_test

import (
	"fmt"
	"testing"

	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/webgpu"
)

// TestCompileGemm builds the tiled GEMM for every codec on the local
// adapter (skips without one).
func TestCompileGemm(t *testing.T) {
	d, err := webgpu.Open()
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	defer d.Close()
	U, R, W := webgpu.Uniform, webgpu.ReadOnly, webgpu.ReadWrite
	for _, c := range shaders.Codecs {
		src, err := shaders.Gemm(c)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("gemm/%s", c)
		if _, err := d.Pipeline(key, src, []webgpu.BindKind{U, R, R, R, W, R}); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
}

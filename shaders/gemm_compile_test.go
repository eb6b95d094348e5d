package shaders_test

import (
	"fmt"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
)

// TestCompileGemm builds the tiled GEMM for every codec on the local
// adapter (skips without one).
func TestCompileGemm(t *testing.T) {
	d, err := gpu.Open(gpu.Options{})
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	defer d.Close()
	U, R, W := gpu.Uniform, gpu.ReadOnly, gpu.ReadWrite
	for _, c := range shaders.Codecs {
		src, err := shaders.Gemm(c)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("gemm/%s", c)
		if _, err := d.Pipeline(key, src, []gpu.BindKind{U, R, R, R, W, R}); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
}

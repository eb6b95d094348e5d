package shaders_test

import (
	"fmt"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
)

// TestCompileHybrid builds the MoE and hybrid-mixer modules on the local
// adapter (skips without one).
func TestCompileHybrid(t *testing.T) {
	d, err := gpu.Open(gpu.Options{})
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	defer d.Close()
	U, R, W := gpu.Uniform, gpu.ReadOnly, gpu.ReadWrite
	for name, kinds := range map[string][]gpu.BindKind{
		shaders.MoERoute:   {U, R, W, R, W, W},
		shaders.MoECombine: {U, R, R, R, R, R, W},
		shaders.ShortConv:  {U, R, R, R, R, W, W},
		shaders.DeltaConv:  {U, R, R, R, W, W},
		shaders.DeltaRule:  {U, R, R, R, R, R, W, W},
		shaders.AttnGate:   {U, R, R, W},
	} {
		src, err := shaders.Hybrid(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Pipeline(name, src, kinds); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, c := range shaders.Codecs {
		src, err := shaders.ExpertMatmul(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Pipeline("moe_matmul/"+c.String(), src, []gpu.BindKind{U, R, R, R, W, R, R}); err != nil {
			t.Errorf("moe_matmul/%s: %v", c, err)
		}
		for _, tb := range []int{1, 8, 16} {
			src, err := shaders.ExpertGemm(c, tb)
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("moe_gemm/%s/tb%d", c, tb)
			if _, err := d.Pipeline(key, src, []gpu.BindKind{U, R, R, R, W, R, R}); err != nil {
				t.Errorf("%s: %v", key, err)
			}
		}
	}
}

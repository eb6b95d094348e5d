package shaders_test

import (
	"fmt"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// TestCompile builds every module on the local adapter (skips without one):
// a WGSL the wgpu-native front end rejects fails here, not at model load.
func TestCompile(t *testing.T) {
	d, err := gpu.Open(gpu.Options{})
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	defer d.Close()
	U, R, W := gpu.Uniform, gpu.ReadOnly, gpu.ReadWrite
	check := func(key, src string, kinds ...gpu.BindKind) {
		if _, err := d.Pipeline(key, src, kinds); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	for _, c := range []tensor.Codec{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0} {
		src, _ := shaders.Embed(c)
		check("embed/"+c.String(), src, U, R, R, R, W)
		for _, tb := range []int{1, 4, 8, 16} {
			src, _ := shaders.Matmul(c, tb)
			check(fmt.Sprintf("matmul/%s/tb%d", c, tb), src, U, R, R, R, W, R)
		}
	}
	check("rmsnorm", shaders.RMSNorm(false), U, R, R, R, W)
	check("rmsnorm/ip", shaders.RMSNorm(true), U, R, R, W)
	// The image kernels (VAE decoder and DiT blocks).
	for _, k := range []struct {
		name  string
		kinds []gpu.BindKind
	}{
		{shaders.Conv2D, []gpu.BindKind{U, R, R, R, R, W}},
		{shaders.Conv2DTiled, []gpu.BindKind{U, R, R, R, R, W}},
		{shaders.GroupNormStats, []gpu.BindKind{U, R, W, W}},
		{shaders.GroupNormApply, []gpu.BindKind{U, R, R, R, R, W}},
		{shaders.CopyF32, []gpu.BindKind{U, R, W}},
		{shaders.AttentionFull, []gpu.BindKind{U, R, R, R, W}},
		{shaders.RowsNorm, []gpu.BindKind{U, R, R, R, W}},
		{shaders.QKRope, []gpu.BindKind{U, R, R, W}},
		{shaders.NormAdd, []gpu.BindKind{U, R, R, R, R, W, W}},
	} {
		src, err := shaders.Source(k.name)
		if err != nil {
			t.Fatal(err)
		}
		check(k.name, src, k.kinds...)
	}
	// The decode attention kernels (every KV codec) and the combining
	// matvec (every codec): the table's variants.
	for _, name := range []string{shaders.QKVPrep, shaders.Attention, shaders.AttentionPrep, shaders.KMatmulComb} {
		k := shaders.Lookup(name)
		vs, err := k.Variants()
		if err != nil {
			t.Fatal(err)
		}
		for v, src := range vs {
			check(name+"/"+v, src, gpu.Kinds(k.Binds)...)
		}
	}
	for _, hd := range []int{4, 32, 128, 256} {
		for _, split := range []int{1, 2, 4, 8} {
			src, err := shaders.AttentionTiledSplitSrc(hd, split)
			if err != nil {
				if hd/4%split == 0 {
					t.Fatal(err)
				}
				continue
			}
			check(fmt.Sprintf("attention_tiled/hd%d/s%d", hd, split), src, U, R, R, R, W)
		}
	}
	for _, c := range []tensor.Codec{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0} {
		src, _ := shaders.Gemm(c)
		check("gemm/"+c.String(), src, U, R, R, R, W, R)
	}
}

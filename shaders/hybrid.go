package shaders

import (
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/tensor"
)

// Kernel names of the MoE and hybrid-mixer modules (see Hybrid).
const (
	MoERoute   = "moe_route"
	MoECombine = "moe_combine"
	ShortConv  = "shortconv"
	DeltaConv  = "delta_conv"
	DeltaRule  = "delta_rule"
	AttnGate   = "attn_gate"
)

// Bounds of the hybrid kernels' private arrays.
const (
	MaxConvKernel = 16  // short conv / DeltaNet conv taps
	MaxDeltaKey   = 128 // DeltaNet key head dim
)

// Hybrid returns a self-contained MoE or hybrid-mixer module by name
// (MoERoute, MoECombine, ShortConv, DeltaConv, DeltaRule, AttnGate).
func Hybrid(name string) (string, error) {
	switch name {
	case MoERoute, MoECombine, ShortConv, DeltaConv, DeltaRule, AttnGate:
		return read(name), nil
	}
	return "", fmt.Errorf("shaders: no module %q", name)
}

// ExpertMatmul is the routed-expert matvec module for expert banks of codec
// c (see moe_matmul.wgsl).
func ExpertMatmul(c tensor.Codec) (string, error) {
	pre, err := codecPreludeShared(c)
	if err != nil {
		return "", err
	}
	return read("moe_matmul") + "\n" + pre, nil
}

// ExpertGemm is the prefill variant of ExpertMatmul: the picks grouped by
// expert, tb tokens per workgroup (see moe_gemm.wgsl).
func ExpertGemm(c tensor.Codec, tb int) (string, error) {
	if tb < 1 || tb > 16 {
		return "", fmt.Errorf("shaders: expert token block %d out of range 1..16", tb)
	}
	pre, err := codecPreludeShared(c)
	if err != nil {
		return "", err
	}
	src := strings.NewReplacer("__TB__", fmt.Sprint(tb), "__RED__", fmt.Sprint(2*64*tb)).Replace(read("moe_gemm"))
	return src + "\n" + pre, nil
}

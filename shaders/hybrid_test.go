package shaders

import (
	"fmt"
	"strings"
	"testing"
)

// TestHybridSubset applies TestSubset's rules to the MoE and hybrid modules.
func TestHybridSubset(t *testing.T) {
	mods := map[string]string{}
	for _, n := range []string{MoERoute, MoECombine, ShortConv, DeltaConv, DeltaRule, AttnGate} {
		src, err := Hybrid(n)
		if err != nil {
			t.Fatal(err)
		}
		mods[n] = src
	}
	for _, c := range Codecs {
		src, err := ExpertMatmul(c)
		if err != nil {
			t.Fatal(err)
		}
		mods["moe_matmul/"+c.String()] = src
		for _, tb := range []int{1, 8, 16} {
			src, err := ExpertGemm(c, tb)
			if err != nil {
				t.Fatal(err)
			}
			mods[fmt.Sprintf("moe_gemm/%s/tb%d", c, tb)] = src
		}
	}
	for name, src := range mods {
		for _, bad := range []string{"__", "enable f16", "override ", "subgroup", "dot4I8Packed", "f16>", ": f16", "<f16"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		if !strings.Contains(src, "@compute") {
			t.Errorf("%s has no entry point", name)
		}
	}
	if _, err := ExpertGemm(Codecs[0], 17); err == nil {
		t.Error("token block 17 accepted")
	}
	if _, err := Hybrid("nope"); err == nil {
		t.Error("unknown module accepted")
	}
}

package shaders

import (
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
	if _, err := Hybrid("nope"); err == nil {
		t.Error("unknown module accepted")
	}
}

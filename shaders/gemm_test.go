package shaders

import (
	"strings"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// gemmTilings are the tilings the benchmarks try; all must generate.
var gemmTilings = []GemmTiling{
	{Rows: 64, Tokens: 64, K: 32, ThreadRows: 8, ThreadTokens: 8},
	{Rows: 64, Tokens: 64, K: 32, ThreadRows: 4, ThreadTokens: 4},
	{Rows: 64, Tokens: 64, K: 32, ThreadRows: 8, ThreadTokens: 4},
	{Rows: 128, Tokens: 64, K: 16, ThreadRows: 8, ThreadTokens: 8},
	{Rows: 128, Tokens: 128, K: 16, ThreadRows: 8, ThreadTokens: 8},
	{Rows: 32, Tokens: 64, K: 32, ThreadRows: 4, ThreadTokens: 4, Unroll: true},
	{Rows: 64, Tokens: 64, K: 32, ThreadRows: 4, ThreadTokens: 8, Unroll: true},
	{Rows: 64, Tokens: 64, K: 16, ThreadRows: 4, ThreadTokens: 8, Unroll: true, Double: true},
}

func TestGemmSubset(t *testing.T) {
	for _, c := range Codecs {
		for _, g := range append([]GemmTiling{gemmTiling, GemmLarge()}, gemmTilings...) {
			src, err := GemmTiled(c, g)
			if err != nil {
				t.Fatalf("%s %+v: %v", c, g, err)
			}
			for _, bad := range []string{"__", "enable f16", "override ", "subgroup", "dot4I8Packed", "f16>", ": f16", "<f16"} {
				if strings.Contains(src, bad) {
					t.Errorf("%s %+v contains %q", c, g, bad)
				}
			}
			if !strings.Contains(src, "@compute") || !strings.Contains(src, "fn fetch4") {
				t.Errorf("%s %+v: no entry point or codec prelude", c, g)
			}
		}
		if r, n := GemmTile(c); r != gemmTiling.Rows || n != gemmTiling.Tokens {
			t.Errorf("GemmTile(%s) = %d, %d", c, r, n)
		}
	}
	if _, err := Gemm(tensor.BF16); err == nil {
		t.Error("bf16 gemm module produced")
	}
	for _, g := range []GemmTiling{
		{},
		{Rows: 64, Tokens: 64, K: 32, ThreadRows: 6, ThreadTokens: 8},               // not a multiple of 4
		{Rows: 60, Tokens: 64, K: 32, ThreadRows: 8, ThreadTokens: 8},               // does not divide
		{Rows: 128, Tokens: 128, K: 32, ThreadRows: 8, ThreadTokens: 8},             // 32 KiB
		{Rows: 256, Tokens: 128, K: 8, ThreadRows: 4, ThreadTokens: 4},              // 2048 threads
		{Rows: 64, Tokens: 64, K: 6, ThreadRows: 8, ThreadTokens: 8},                // K not a multiple of 4
		{Rows: 64, Tokens: 64, K: 32, ThreadRows: 4, ThreadTokens: 8, Double: true}, // 32 KiB
	} {
		if err := g.Check(); err == nil {
			t.Errorf("tiling %+v accepted", g)
		}
	}
}

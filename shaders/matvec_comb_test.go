package shaders

import (
	"strings"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// TestMatvecCombRefused: a combine geometry that cannot describe the
// matvec's input row is an error naming it, never a kernel.
func TestMatvecCombRefused(t *testing.T) {
	sh := MatvecShape{Rows: 4, Sets: 4, Groups: 1}
	good := Comb{Heads: 4, HD: 64, SplitLen: 64, MaxSplits: 8}
	if _, err := MatvecComb(tensor.Q4_0, sh, 256, good); err != nil {
		t.Fatalf("%+v: %v", good, err)
	}
	for _, cb := range []Comb{
		{Heads: 4, HD: 64, SplitLen: 64, MaxSplits: 8, Window: -1},
		{Heads: 4, HD: 62, SplitLen: 64, MaxSplits: 8},
		{Heads: 2, HD: 64, SplitLen: 64, MaxSplits: 8},
		{Heads: 4, HD: 64, SplitLen: 0, MaxSplits: 8},
		{Heads: 4, HD: 64, SplitLen: 64},
	} {
		if _, err := MatvecComb(tensor.Q4_0, sh, 256, cb); err == nil || !strings.Contains(err.Error(), "matvec combine") {
			t.Errorf("%+v: err %v, want a refusal naming the combine", cb, err)
		}
	}
}

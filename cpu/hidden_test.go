package cpu

import "testing"

// TestHiddenStates: HiddenStates(ids, k) equals transformers'
// hidden_states[k] for every k below the last (whose reference entry has
// the final norm applied) on the tiny qwen3 and gemma2 (embedding scale).
func TestHiddenStates(t *testing.T) {
	for _, name := range []string{"qwen3", "gemma2"} {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			if ref.Hidden == nil {
				t.Skip("reference has no hidden_states")
			}
			b, err := New(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			L, n, H := len(b.layers), len(ref.InputIDs), b.arch.Hidden
			for k := 0; k < L; k++ {
				h, err := b.HiddenStates(ref.InputIDs, k)
				if err != nil {
					t.Fatal(err)
				}
				if d, at := maxAbsDiff(h, ref.Hidden[k*n*H:(k+1)*n*H]); d > parityTol {
					t.Errorf("hidden_states[%d]: max |diff| %.3g at %d", k, d, at)
				}
			}
			if _, err := b.HiddenStates(ref.InputIDs, L+1); err == nil {
				t.Errorf("HiddenStates past the last layer: no error")
			}
		})
	}
}

package webgpu

import (
	"github.com/cortiq/cortiq/fixtures"
	"math"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
)

// parityTol is the absolute logit tolerance against transformers: the
// device sums in another order (tree reductions, online softmax), which
// costs a few float32 ulps per layer, well inside 2e-3.
const parityTol = 2e-3

func loadFixture(t testing.TB, name string) (*model.Model, *fixtures.Reference) {
	dir := fixtures.Tiny(t, name)
	if slices.Contains(fixtures.InRepo, name) {
		dir = fixtures.Local(t, name)
	}
	m, err := importer.FromHF(dir)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		if m.Close != nil {
			m.Close()
		}
	})
	return m, fixtures.LoadReference(t, dir)
}

func maxAbsDiff(a, b []float32) (float64, int) {
	var m float64
	at := -1
	for i := range a {
		d := math.Abs(float64(a[i] - b[i]))
		if d > m || math.IsNaN(d) {
			m, at = d, i
		}
	}
	return m, at
}

func argmaxF(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func top2Margin(x []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range x {
		f := float64(v)
		if f > a {
			a, b = f, a
		} else if f > b {
			b = f
		}
	}
	return a - b
}

// checkRows compares rows of logits and the greedy picks where the
// reference's top-2 margin exceeds the tolerance.
func checkRows(t *testing.T, what string, got, want []float32, vocab int, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	d, at := maxAbsDiff(got, want)
	t.Logf("%s: max |Δlogit| %.2e", what, d)
	if d > tol {
		t.Errorf("%s: max |Δlogit| %.3g at row %d col %d (tol %.0e)", what, d, at/vocab, at%vocab, tol)
	}
	for r := 0; r < len(want)/vocab; r++ {
		g, w := got[r*vocab:(r+1)*vocab], want[r*vocab:(r+1)*vocab]
		if top2Margin(w) > tol && argmaxF(g) != argmaxF(w) {
			t.Errorf("%s: row %d picks %d, reference %d", what, r, argmaxF(g), argmaxF(w))
		}
	}
}

func TestParityDense(t *testing.T) { parityDense(t, fixtures.Dense) }

// TestParitySplitK reruns fixtures with split-K attention over 8-position
// splits, windows included.
func TestParitySplitK(t *testing.T) {
	splitLenOverride = 8
	defer func() { splitLenOverride = 0 }()
	parityDense(t, []string{"llama", "mistral_sw8", "gemma2_sw8", "gemma3_text_sw8", "qwen3"})
}

func parityDense(t *testing.T, fixtures []string) {
	d := testDevice(t)
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			b, err := New(m, Options{Device: d, Chunk: 16})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			vocab := m.Arch.Vocab
			s, err := b.newSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// The 24-token prompt spans two prefill chunks of 16.
			got, err := s.Forward(ref.InputIDs, true)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, "prompt", got, ref.Logits, vocab, parityTol)
			// Cached decode, fed the reference's greedy tokens.
			s.Reset()
			last, err := s.Forward(ref.InputIDs, false)
			if err != nil {
				t.Fatal(err)
			}
			steps := make([]float32, 0, len(ref.StepLogits))
			steps = append(steps, last...)
			for _, tok := range ref.Generated[:len(ref.Generated)-1] {
				l, err := s.Forward([]int{tok}, false)
				if err != nil {
					t.Fatal(err)
				}
				steps = append(steps, l...)
			}
			checkRows(t, "decode", steps, ref.StepLogits, vocab, parityTol)
		})
	}
}

package cpu

import (
	"slices"
	"testing"

	"github.com/cortiq/cortiq/model"
)

// greedyRun runs ids through a fresh session of m (at most maxLen
// positions), then steps greedy picks one token at a time; it returns every
// logit row (the prompt's, then each step's) and the picks.
func greedyRun(t *testing.T, m *model.Model, ids []int, steps, maxLen int) (logits []float32, greedy []int) {
	t.Helper()
	b, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.NewSession(maxLen)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if logits, err = s.Forward(ids, true); err != nil {
		t.Fatal(err)
	}
	last := logits[len(logits)-m.Arch.Vocab:]
	for range steps {
		tok := argmax(last)
		greedy = append(greedy, tok)
		if last, err = s.Forward([]int{tok}, false); err != nil {
			t.Fatal(err)
		}
		logits = append(logits, last...)
	}
	return logits, greedy
}

// checkTwin runs a quantized model and its dequantized float32 twin the same
// way (greedyRun) and wants their logits within parityTol and the same
// greedy tokens: the file computes exactly the float math of its weights.
func checkTwin(t *testing.T, label string, m, twin *model.Model, ids []int, steps, maxLen int) {
	t.Helper()
	got, gotTok := greedyRun(t, m, ids, steps, maxLen)
	want, wantTok := greedyRun(t, twin, ids, steps, maxLen)
	d, at := maxAbsDiff(got, want)
	t.Logf("%s: max |quantized - f32 twin| = %.2e; greedy %v", label, d, gotTok)
	if d > parityTol {
		t.Errorf("logit %d: %g vs twin %g (|d| %.2e > %g)", at, got[at], want[at], d, parityTol)
	}
	if !slices.Equal(gotTok, wantTok) {
		t.Fatalf("greedy tokens %v, twin %v", gotTok, wantTok)
	}
}

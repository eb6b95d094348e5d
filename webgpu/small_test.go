package webgpu

import (
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// smallTol bounds a small step's logits against one-token steps over the
// same positions: the projections' sums are the decode matvec's, the
// attention splits are a decode step's, and only a fused norm's sum of
// squares is taken in another order.
const smallTol = 1e-4

// TestSmallSteps: steps of 2..16 tokens (speculative verification) run the
// one-token graph with batched matvecs, and their logits are those of
// one-token steps over the same positions (within smallTol, the same
// argmax where the top two are apart) and of the prefill kernels
// (Tuning.SmallSteps "off", within parityTol), on every fixture family
// (gpt-oss left out for time: its sinks take the decode split as before);
// VerifyGreedy picks the one-token steps' argmax.
func TestSmallSteps(t *testing.T) {
	for _, name := range slices.Concat(fixtures.Dense, fixtures.Hybrid) {
		t.Run(name, func(t *testing.T) { checkSmallSteps(t, name) })
	}
}

// TestSmallStepsSplit is TestSmallSteps with split-K spans of 8
// positions, so the fixtures' short sequences take the split attention
// with every row of the step (sliding windows, rings, hybrids, sinks).
func TestSmallStepsSplit(t *testing.T) {
	splitLenOverride = 8
	t.Cleanup(func() { splitLenOverride = 0 })
	for _, name := range []string{"llama", "gemma2_sw8", "qwen3_next", "gpt_oss_e8"} {
		t.Run(name, func(t *testing.T) { checkSmallSteps(t, name) })
	}
}

func checkSmallSteps(t *testing.T, name string) {
	d := testDevice(t)
	m, ref := loadFixture(t, name)
	prompt := ref.InputIDs
	n := 16
	_, s := testSession(t, m, Options{Device: d, Chunk: 32}, len(prompt)+n+1)
	_, off := testSession(t, m, Options{Device: d, Chunk: 32, Tuning: Tuning{SmallSteps: "off"}}, len(prompt)+n+1)
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = prompt[(5*i+2)%len(prompt)]
	}
	// One-token steps: the reference rows.
	s.Reset()
	if _, err := s.Forward(prompt, false); err != nil {
		t.Fatal(err)
	}
	var one []float32
	for _, tok := range tokens {
		l, err := s.Forward([]int{tok}, false)
		if err != nil {
			t.Fatal(err)
		}
		one = append(one, l...)
	}
	vocab := m.Arch.Vocab
	ks := []int{2, 5, 16}
	if slices.Contains(fixtures.Hybrid, name) && splitLenOverride == 0 {
		ks = []int{5} // for time: their layers are the slow ones on lavapipe
	}
	for _, k := range ks {
		run := func(s *Session) []float32 {
			t.Helper()
			s.Reset()
			if _, err := s.Forward(prompt, false); err != nil {
				t.Fatal(err)
			}
			got, err := s.Forward(tokens[:k], true)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		got := run(s)
		if !s.smallOK[k] {
			t.Fatalf("a step of %d tokens did not build its small-step kernels", k)
		}
		d1, at := maxAbsDiff(got, one[:k*vocab])
		if d1 > smallTol {
			t.Errorf("%d tokens: small step differs from one-token steps by %g at row %d", k, d1, at/vocab)
		}
		d2, at := maxAbsDiff(got, run(off))
		if d2 > parityTol {
			t.Errorf("%d tokens: small step differs from the prefill kernels by %g at row %d", k, d2, at/vocab)
		}
		t.Logf("%d tokens: %.2g from one-token steps, %.2g from the prefill kernels", k, d1, d2)
		if off.smallOK[k] {
			t.Errorf("SmallSteps off built a small step of %d tokens", k)
		}
		s.Reset()
		if _, err := s.Forward(prompt, false); err != nil {
			t.Fatal(err)
		}
		picks, err := s.VerifyGreedy(tokens[:k])
		if err != nil {
			t.Fatal(err)
		}
		for r, p := range picks {
			row := one[r*vocab : (r+1)*vocab]
			if w := argmaxF(row); p != w && top2Margin(row) > 1e-4 {
				t.Errorf("%d tokens: VerifyGreedy row %d picked %d, one-token steps %d", k, r, p, w)
			}
		}
	}
}

// TestSmallStepGraph: a small step launches the one-token graph's kernels
// (no separate pre-norms or activations), its dense projections through
// the batched matvec, each weight once; a short prompt does not.
func TestSmallStepGraph(t *testing.T) {
	d := testDevice(t)
	m, _ := loadFixture(t, "llama")
	_, s := testSession(t, m, Options{Device: d, Chunk: 32}, 256)
	labels := func(n int, all bool) []string {
		s.beginStep(n, all)
		defer s.endStep()
		var out []string
		for _, ds := range s.encodeLayers(nil, 0, len(s.layerOps), n, n, 200) {
			out = append(out, ds.Label)
		}
		return out
	}
	// One-token steps merge split attention's partials in the output
	// projection (combineInto); small steps keep the combine dispatch and
	// the batched o.
	var one []string
	for _, l := range labels(1, false) {
		if layer, ok := strings.CutSuffix(l, " o (combine)"); ok {
			one = append(one, layer+" attention combine", layer+" o")
			continue
		}
		one = append(one, l)
	}
	five := labels(5, true)
	if !slices.Equal(one, five) {
		t.Errorf("a step of 5 tokens launches\n%v\none token\n%v", five, one)
	}
	// A prompt of 5 (not every row's logits) keeps the prefill kernels.
	if prompt := labels(5, false); !slices.Contains(prompt, "L0 attn norm") {
		t.Errorf("a 5-token prompt step launches %v", prompt)
	}
	for _, l := range five {
		if strings.Contains(l, "norm)") {
			continue // the fused-norm variants
		}
		if strings.HasSuffix(l, "attn norm") || strings.HasSuffix(l, "ffn norm") || strings.HasSuffix(l, " act") {
			t.Errorf("a small step launches %q", l)
		}
	}
	s.beginStep(5, true)
	defer s.endStep()
	for _, o := range s.layerOps[0] {
		if o.small == nil {
			continue
		}
		ds := s.dispatchOp(o, 5, 5)
		if ds.P != o.small.pipes[5] || ds.Z != 1 {
			t.Errorf("%s: small step dispatches %v over z %d, want the batched matvec once", o.label, ds.P, ds.Z)
		}
	}
}

//go:build !js

package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/sample"
)

// splitTol is the device's parity tolerance against transformers
// (webgpu's parityTol): the CPU layers of a split are the reference's own.
const splitTol = 2e-3

// splitEngine loads a tiny fixture with the device holding the given
// layers; it skips without an adapter.
func splitEngine(t *testing.T, name string, opts Options) (*Engine, *fixtures.Reference) {
	t.Helper()
	dir := fixtures.Tiny(t, name)
	opts.Backend = "webgpu"
	e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if e.dev == nil {
		needAdapter(t)
		t.Fatalf("device refused: %v", e.DeviceError())
	}
	return e, fixtures.LoadReference(t, dir)
}

// testSplit opens a session and checks that it is split.
func (e *Engine) testSplit(t *testing.T, maxLen int) (*session, *splitSession) {
	t.Helper()
	s, err := e.newSession(maxLen, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sp, ok := s.cur.(*splitSession)
	if !ok || !s.onDevice {
		t.Fatalf("session on %s (%T), want a split device session", s.name(), s.cur)
	}
	return s, sp
}

// TestSplitParity: a model whose layers are split between the device and
// the CPU (device, CPU, device, CPU; CPU first; DeltaNet state crossing at
// every boundary) gives transformers' logits for a prompt and a decode
// step, the scheduler moving the hidden state between the two.
func TestSplitParity(t *testing.T) {
	for _, tc := range []struct{ name, layers string }{
		{"smollm3", "0,2"},
		{"smollm3", "1-3"},
		{"qwen3_next", "0,3"},
	} {
		t.Run(tc.name+"/"+tc.layers, func(t *testing.T) {
			e, ref := splitEngine(t, tc.name, Options{GPULayers: tc.layers})
			s, sp := e.testSplit(t, 64)
			vocab := e.Model.Arch.Vocab
			got, err := s.Forward(ref.InputIDs, true)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(got, ref.Logits); d > splitTol || len(got) != len(ref.Logits) {
				t.Errorf("prompt: %d logits, max |Δ| %.3g (tol %g)", len(got), d, splitTol)
			}
			l, err := s.Forward(ref.Generated[:1], false)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(l, ref.StepLogits[vocab:2*vocab]); d > splitTol {
				t.Errorf("decode: max |Δ| %.3g (tol %g)", d, splitTol)
			}
			if sp.runs == 0 || s.stats().FallbackOps == 0 {
				t.Errorf("no layer ran on the CPU (%d runs, stats %+v)", sp.runs, s.stats())
			}
			if s.failure != nil {
				t.Errorf("the device failed: %v", s.failure)
			}
		})
	}
}

// TestSplitRewind: with DeltaNet layers on the CPU, Rewind rewinds both
// sides: regenerating after a rollback equals, bit for bit, a session
// that never went there; past the rewind depth it is refused.
func TestSplitRewind(t *testing.T) {
	e, ref := splitEngine(t, "qwen3_next", Options{GPULayers: "0,3", RewindDepth: 3})
	run := func(x []int, j int) []float32 {
		s, sp := e.testSplit(t, 32)
		if _, err := s.Forward(ref.InputIDs, false); err != nil {
			t.Fatal(err)
		}
		for _, tok := range x {
			if _, err := s.Forward([]int{tok}, false); err != nil {
				t.Fatal(err)
			}
		}
		if got := sp.Rewindable(); got != 3 {
			t.Errorf("Rewindable %d with a depth of 3", got)
		}
		if err := sp.Rewind(4); err == nil {
			t.Error("a rewind past the depth was accepted")
		}
		if err := sp.Rewind(j); err != nil {
			t.Fatal(err)
		}
		s.history = s.history[:len(s.history)-j]
		l, err := s.Forward([]int{13, 2}, true)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	x := []int{3, 17, 5, 29, 11}
	got := run(x, 2)
	want := run(x[:3], 0)
	if d := maxDiff(got, want); d != 0 {
		t.Errorf("after rewinding the split session: logits differ by %g", d)
	}
}

// TestSplitVerifyGreedy: a split session verifies greedy drafts as the
// argmax of Forward(all)'s rows and continues exactly after it.
func TestSplitVerifyGreedy(t *testing.T) {
	e, ref := splitEngine(t, "qwen3_next", Options{GPULayers: "0,3"})
	prompt := ref.InputIDs
	tokens := make([]int, 6)
	for i := range tokens {
		tokens[i] = prompt[(3*i+1)%len(prompt)]
	}
	s, _ := e.testSplit(t, 64)
	if _, err := s.Forward(prompt, false); err != nil {
		t.Fatal(err)
	}
	logits, err := s.Forward(tokens, true)
	if err != nil {
		t.Fatal(err)
	}
	next, err := s.Forward(tokens[:1], false)
	if err != nil {
		t.Fatal(err)
	}
	vocab := e.Model.Arch.Vocab
	var want []int
	for r := range tokens {
		want = append(want, sample.Argmax(logits[r*vocab:(r+1)*vocab]))
	}
	v, _ := e.testSplit(t, 64)
	if _, err := v.Forward(prompt, false); err != nil {
		t.Fatal(err)
	}
	got, err := v.VerifyGreedy(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("VerifyGreedy %v, Forward(all)+argmax %v", got, want)
	}
	after, err := v.Forward(tokens[:1], false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, next) || v.failure != nil {
		t.Errorf("the split session does not continue after VerifyGreedy as after Forward(all) (failure %v)", v.failure)
	}
}

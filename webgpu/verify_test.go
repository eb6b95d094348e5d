package webgpu

import (
	"slices"
	"testing"
)

// TestVerifyGreedy: VerifyGreedy's device picks are the argmax of every
// row of Forward(all)'s logits on the same positions, over more rows than
// one step returns (headChunk); the session continues exactly after it.
// (A split model verifies through the engine: engine/split_test.go.)
func TestVerifyGreedy(t *testing.T) {
	d := testDevice(t)
	check := func(t *testing.T, s *Session, prompt []int, n int) {
		t.Helper()
		tokens := make([]int, n)
		for i := range tokens {
			tokens[i] = prompt[(3*i+1)%len(prompt)]
		}
		s.Reset()
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
		vocab := len(logits) / n
		var want []int
		for r := range n {
			want = append(want, argmaxF(logits[r*vocab:(r+1)*vocab]))
		}
		s.Reset()
		if _, err := s.Forward(prompt, false); err != nil {
			t.Fatal(err)
		}
		got, err := s.VerifyGreedy(tokens)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("VerifyGreedy of %d tokens %v\nForward(all)+argmax %v", n, got, want)
		}
		if s.Len() != len(prompt)+n {
			t.Errorf("Len %d after VerifyGreedy, want %d", s.Len(), len(prompt)+n)
		}
		after, err := s.Forward(tokens[:1], false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(after, next) {
			t.Error("the session does not continue after VerifyGreedy as after Forward(all)")
		}
	}
	for _, name := range []string{"llama", "gemma3_text_sw8", "qwen3_next"} {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			_, s := testSession(t, m, Options{Device: d, Chunk: 16}, 96)
			for _, n := range []int{1, 5, headChunk + 3} {
				check(t, s, ref.InputIDs, n)
			}
		})
	}
}

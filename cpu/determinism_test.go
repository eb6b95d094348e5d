package cpu

import "testing"

// The forward pass is deterministic: the same tokens give bit-identical
// logits, whether prefilled at once or fed one at a time.
func TestDeterministic(t *testing.T) {
	m, ref := loadFixture(t, "llama")
	b, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := func() []float32 {
		s, _ := b.NewSession(32)
		lg, err := s.Forward(ref.InputIDs, true)
		if err != nil {
			t.Fatal(err)
		}
		return lg
	}
	a := run()
	for i := range 5 {
		if d, _ := maxAbsDiff(a, run()); d != 0 {
			t.Fatalf("run %d differs by %g", i, d)
		}
	}
}

// Sessions of one backend run concurrently without sharing state.
func TestConcurrentSessions(t *testing.T) {
	m, ref := loadFixture(t, "qwen3_next")
	b, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s0, _ := b.NewSession(32)
	want, _ := s0.Forward(ref.InputIDs, true)
	errs := make(chan error, 4)
	got := make([][]float32, 4)
	for g := range got {
		go func() {
			s, _ := b.NewSession(32)
			var err error
			got[g], err = s.Forward(ref.InputIDs, true)
			errs <- err
		}()
	}
	for range got {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for g := range got {
		if d, _ := maxAbsDiff(got[g], want); d != 0 {
			t.Errorf("session %d differs by %g", g, d)
		}
	}
}

// Reset forgets the sequence, recurrent states included.
func TestReset(t *testing.T) {
	for _, name := range []string{"lfm2", "qwen3_next", "gemma2_sw8"} {
		m, ref := loadFixture(t, name)
		b, err := New(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := b.NewSession(64)
		a, _ := s.Forward(ref.InputIDs, true)
		s.Reset()
		if s.Len() != 0 {
			t.Fatalf("%s: Len after Reset = %d", name, s.Len())
		}
		c, _ := s.Forward(ref.InputIDs, true)
		if d, _ := maxAbsDiff(a, c); d != 0 {
			t.Errorf("%s: after Reset the logits differ by %g", name, d)
		}
	}
}

func TestForwardErrors(t *testing.T) {
	m, _ := loadFixture(t, "llama")
	b, _ := New(m, Options{})
	s, _ := b.NewSession(4)
	if _, err := s.Forward([]int{1, 2, 3, 4, 5}, false); err == nil {
		t.Error("overflowing the session length was accepted")
	}
	if _, err := s.Forward([]int{m.Arch.Vocab}, false); err == nil {
		t.Error("out-of-vocabulary token was accepted")
	}
	if _, err := s.Forward(nil, false); err == nil {
		t.Error("empty forward was accepted")
	}
}

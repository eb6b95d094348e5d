package sample

import (
	"math"
	"testing"
)

func TestGreedyPicksArgmax(t *testing.T) {
	s := New(Params{})
	if got := s.Sample([]float32{0.1, 3, -1, 2.9}, nil); got != 1 {
		t.Fatalf("greedy = %d, want 1", got)
	}
}

func TestSeededIsDeterministic(t *testing.T) {
	logits := func() []float32 {
		l := make([]float32, 100)
		for i := range l {
			l[i] = float32(math.Sin(float64(i)))
		}
		return l
	}
	p := Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42}
	a, b := New(p), New(p)
	for i := 0; i < 50; i++ {
		x, y := a.Sample(logits(), nil), b.Sample(logits(), nil)
		if x != y {
			t.Fatalf("step %d: %d != %d", i, x, y)
		}
	}
}

func TestTopKOneIsGreedy(t *testing.T) {
	s := New(Params{Temperature: 1.5, TopK: 1, Seed: 7})
	for i := 0; i < 20; i++ {
		if got := s.Sample([]float32{0, 1, 5, 2}, nil); got != 2 {
			t.Fatalf("top-k 1 = %d", got)
		}
	}
}

func TestMinPFiltersTail(t *testing.T) {
	// p(2) dominates; min-p 0.5 keeps only it.
	s := New(Params{Temperature: 1, MinP: 0.5, Seed: 3})
	for i := 0; i < 50; i++ {
		if got := s.Sample([]float32{0, 0, 8, 0}, nil); got != 2 {
			t.Fatalf("min-p kept %d", got)
		}
	}
}

func TestTopPDistribution(t *testing.T) {
	// Two tokens share ~all mass; top-p 0.9 keeps both, never the rest.
	s := New(Params{Temperature: 1, TopP: 0.9, Seed: 11})
	seen := map[int]int{}
	for i := 0; i < 2000; i++ {
		seen[s.Sample([]float32{5, 5, -10, -10}, nil)]++
	}
	if seen[2]+seen[3] != 0 || seen[0] < 800 || seen[1] < 800 {
		t.Fatalf("top-p counts %v", seen)
	}
}

func TestPenalties(t *testing.T) {
	l := []float32{2, -2, 1}
	Penalize(l, []int{0, 1, 1}, Params{RepeatPenalty: 2, FrequencyPenalty: 0.5, PresencePenalty: 0.25})
	want := []float32{2/2.0 - 0.5 - 0.25, -2*2.0 - 1 - 0.25, 1}
	for i := range l {
		if math.Abs(float64(l[i]-want[i])) > 1e-6 {
			t.Fatalf("penalized %v, want %v", l, want)
		}
	}
}

// A temperature just above zero saturates the softmax instead of overflowing
// the scaled logits to ±Inf (Inf−Inf = NaN picked an arbitrary token).
func TestTinyTemperature(t *testing.T) {
	for _, temp := range []float32{1e-30, 1e-45, 1e-20} {
		s := New(Params{Temperature: temp, Seed: 7})
		for range 50 {
			if got := s.Sample([]float32{0.5, 3, -2, 2.999}, nil); got != 1 {
				t.Fatalf("temperature %g: picked %d, want the argmax 1", temp, got)
			}
		}
	}
}

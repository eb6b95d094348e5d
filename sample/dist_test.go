package sample

import (
	"math"
	"testing"
)

// Dist is the distribution Sample draws from: its ids are the survivors of
// top-k/top-p, its probabilities sum to one, and Sample's picks with the
// same seed fall inside it; greedy params give the argmax with certainty.
func TestDist(t *testing.T) {
	logits := []float32{1, 3, 2, -1, 2.5, 0}
	p := Params{Temperature: 0.7, TopK: 3, Seed: 7}
	d := New(p).Dist(append([]float32(nil), logits...), nil)
	if len(d.IDs) != 3 || d.IDs[0] != 1 || d.IDs[1] != 4 || d.IDs[2] != 2 {
		t.Fatalf("ids %v, want the top 3 [1 4 2]", d.IDs)
	}
	var sum float64
	for _, v := range d.P {
		sum += v
	}
	if math.Abs(sum-1) > 1e-12 || d.P[0] <= d.P[1] || d.Prob(3) != 0 {
		t.Errorf("probabilities %v (sum %g)", d.P, sum)
	}
	s := New(p)
	counts := map[int]int{}
	const n = 20000
	for range n {
		id := s.Sample(append([]float32(nil), logits...), nil)
		if d.Prob(id) == 0 {
			t.Fatalf("Sample picked %d outside the distribution", id)
		}
		counts[id]++
	}
	dr := New(Params{Seed: 3})
	drawn := map[int]int{}
	for range n {
		drawn[dr.Draw(d)]++
	}
	for i, id := range d.IDs {
		for _, c := range []map[int]int{counts, drawn} {
			if got := float64(c[id]) / n; math.Abs(got-d.P[i]) > 0.02 {
				t.Errorf("id %d drawn with frequency %.3f, probability %.3f", id, got, d.P[i])
			}
		}
	}
	g := New(Params{}).Dist(append([]float32(nil), logits...), nil)
	if len(g.IDs) != 1 || g.IDs[0] != 1 || g.P[0] != 1 {
		t.Errorf("greedy distribution %+v", g)
	}
}

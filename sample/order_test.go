package sample

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"
)

// refDist is dist as it was written first: one comparison sort of every
// finite candidate. The fast orders (topK, radixDesc) must agree with it
// exactly.
func refDist(p Params, logits []float32) ([]candidate, []float64, int) {
	s := New(p)
	Penalize(logits, nil, p)
	var c []candidate
	for i, v := range logits {
		if !math.IsInf(float64(v), -1) && !math.IsNaN(float64(v)) {
			c = append(c, candidate{i, v})
		}
	}
	sort.Slice(c, func(a, b int) bool {
		if c[a].v != c[b].v {
			return c[a].v > c[b].v
		}
		return c[a].id < c[b].id
	})
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	_ = s
	maxv := float64(c[0].v)
	probs := make([]float64, len(c))
	var sum float64
	for i := range c {
		probs[i] = math.Exp((float64(c[i].v) - maxv) * (1 / float64(p.Temperature)))
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	return c, probs, len(c)
}

// TestFastOrderExact: the candidates and probabilities dist computes equal
// a full comparison sort's bit for bit, ties (by id), ±0, ±Inf and NaN
// included, for top-k cuts on both sides of heapTopK and none.
func TestFastOrderExact(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for trial := 0; trial < 60; trial++ {
		n := 1 + r.Intn(5000)
		logits := make([]float32, n)
		for i := range logits {
			switch r.Intn(12) {
			case 0:
				logits[i] = float32(r.Intn(5)) // many exact ties
			case 1:
				logits[i] = float32(math.Copysign(0, -1))
			case 2:
				logits[i] = 0
			case 3:
				logits[i] = float32(math.Inf(-1))
			case 4:
				if r.Intn(20) == 0 {
					logits[i] = float32(math.NaN())
				} else {
					logits[i] = -float32(r.Intn(3))
				}
			default:
				logits[i] = float32(r.NormFloat64() * 4)
			}
		}
		logits[r.Intn(n)] = 1 // at least one finite
		for _, k := range []int{0, 1, 3, 40, heapTopK, heapTopK + 1, n - 1, n, n + 5} {
			p := Params{Temperature: 0.7, TopK: k, Seed: uint64(trial)}
			want, wantP, _ := refDist(p, append([]float32(nil), logits...))
			s := New(p)
			got, gotP, _, ok := s.dist(append([]float32(nil), logits...), nil)
			if !ok {
				t.Fatalf("trial %d k %d: dist not ok", trial, k)
			}
			sameDist(t, fmt.Sprintf("trial %d k %d", trial, k), got, gotP, want, wantP)
		}
	}
}

// sameDist fails t unless got and gotP equal want and wantP bit for bit.
func sameDist(t *testing.T, what string, got []candidate, gotP []float64, want []candidate, wantP []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d candidates, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] || gotP[i] != wantP[i] {
			t.Fatalf("%s: candidate %d = %v (p %v), want %v (p %v)", what, i, got[i], gotP[i], want[i], wantP[i])
		}
	}
}

// TestParallelOrderExact: the split passes (radixDesc's chunks, the
// softmax's) give the single goroutine's candidates and probabilities bit
// for bit, chunk counts that do not divide the candidates included.
func TestParallelOrderExact(t *testing.T) {
	defer func(m, w int) { parallelMin, maxWorkers = m, w }(parallelMin, maxWorkers)
	r := rand.New(rand.NewSource(11))
	for trial := 0; trial < 6; trial++ {
		n := 20000 + r.Intn(50000)
		logits := make([]float32, n)
		for i := range logits {
			switch r.Intn(8) {
			case 0:
				logits[i] = float32(r.Intn(7)) - 3 // ties across chunks
			case 1:
				logits[i] = float32(math.Inf(-1))
			default:
				logits[i] = float32(r.NormFloat64() * 3)
			}
		}
		logits[r.Intn(n)] = 9
		for _, k := range []int{0, heapTopK + 1, n / 2} {
			p := Params{Temperature: 0.9, TopK: k, Seed: uint64(trial)}
			want, wantP, _ := refDist(p, append([]float32(nil), logits...))
			for _, w := range []int{1, 3, 7} {
				parallelMin, maxWorkers = 1024, w
				got, gotP, _, _ := New(p).dist(append([]float32(nil), logits...), nil)
				sameDist(t, fmt.Sprintf("trial %d k %d workers %d", trial, k, w), got, gotP, want, wantP)
			}
		}
	}
}

// BenchmarkSample128k is one sampled token over a Llama-3-sized
// vocabulary with the CLI's defaults (top-k 40) and the OpenAI server's
// (top-k off, top-p 1).
func BenchmarkSample128k(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	l := make([]float32, 128256)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 3)
	}
	w := make([]float32, len(l))
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"cli", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1}},
		{"openai", Params{Temperature: 1, Seed: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := New(c.p)
			for i := 0; i < b.N; i++ {
				copy(w, l)
				s.Sample(w, nil)
			}
		})
	}
}

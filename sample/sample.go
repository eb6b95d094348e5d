// Package sample turns logits into the next token id: greedy, temperature,
// top-k, top-p, min-p and repetition/presence/frequency penalties, seeded
// and deterministic (the same seed and logits give the same ids on every
// platform, since the generator is ours and not math/rand's global state).
package sample

import (
	"math"
	"runtime"
	"slices"
	"sync"
)

// Params are the sampling settings of one generation.
type Params struct {
	Temperature      float32 // <= 0 means greedy
	TopK             int     // 0 = off
	TopP             float32 // 0 or >= 1 = off
	MinP             float32 // 0 = off
	RepeatPenalty    float32 // 1 or 0 = off (llama.cpp style: divide positive logits, multiply negative)
	PresencePenalty  float32
	FrequencyPenalty float32
	RepeatLastN      int // window of previous tokens the penalties look at; 0 = 64, -1 = all
	Seed             uint64
}

// Greedy reports whether p selects the argmax.
func (p Params) Greedy() bool { return p.Temperature <= 0 }

// Sampler holds the random state of one generation.
type Sampler struct {
	p     Params
	state uint64
	cand  []candidate
	keys  []uint64  // radixDesc's scratch
	probs []float64 // dist's probabilities (valid until the next call)
}

type candidate struct {
	id int
	v  float32
}

// better is the candidates' order: the larger logit first, the lower id
// on ties.
func better(a, b candidate) bool {
	if a.v != b.v {
		return a.v > b.v
	}
	return a.id < b.id
}

// heapTopK is the largest top-k the heap selection serves; larger cuts
// sort everything.
const heapTopK = 512

// finite is whether a logit is a candidate at all (-Inf and NaN are not).
func finite(v float32) bool { return v == v && !math.IsInf(float64(v), -1) }

// topK returns the k best finite candidates of logits (all of them when
// fewer), best first, in h's storage: h is kept as a heap whose root is
// the worst kept candidate, and every later candidate better than that
// root replaces it.
func topK(logits []float32, k int, h []candidate) []candidate {
	down := func(i int) {
		n := len(h)
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < n && better(h[w], h[l]) {
				w = l
			}
			if r < n && better(h[w], h[r]) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	i := 0
	for ; i < len(logits) && len(h) < k; i++ {
		if v := logits[i]; finite(v) {
			h = append(h, candidate{i, v})
		}
	}
	for j := len(h)/2 - 1; j >= 0; j-- {
		down(j)
	}
	for ; i < len(logits); i++ {
		v := logits[i]
		// A later id loses every tie, so only a larger logit enters.
		if v > h[0].v && finite(v) {
			h[0] = candidate{i, v}
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b candidate) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	return h
}

// radixDesc sorts c (candidates of logits, in ascending id order) in the
// order of better: each candidate becomes a uint64 whose high half orders
// the logits descending (-0 as +0: they compare equal) and whose low half
// is the id, and a stable least-significant-digit radix sort on the high
// half orders them (ties keep the ascending ids). keys is scratch (grown
// as needed, returned for reuse). Above parallelMin candidates each pass
// runs on up to maxWorkers goroutines over contiguous chunks (per-chunk
// digit counts, so the scatter stays stable): the same order.
func radixDesc(c []candidate, logits []float32, keys []uint64) []uint64 {
	n := len(c)
	if cap(keys) < 2*n {
		keys = make([]uint64, 2*n)
	}
	src, dst := keys[:n], keys[n:2*n]
	w := workers(n)
	chunks(w, n, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			x := c[i]
			v := x.v
			if v == 0 {
				v = 0
			}
			u := math.Float32bits(v)
			if u&0x80000000 != 0 {
				u = ^u
			} else {
				u |= 0x80000000
			}
			src[i] = uint64(^u)<<32 | uint64(uint32(x.id))
		}
	})
	counts := make([][1 << 11]int, w)
	for _, d := range [...]struct{ shift, bits uint }{{32, 11}, {43, 11}, {54, 10}} {
		mask := uint64(1)<<d.bits - 1
		chunks(w, n, func(j, lo, hi int) {
			cnt := &counts[j]
			*cnt = [1 << 11]int{}
			for _, k := range src[lo:hi] {
				cnt[(k>>d.shift)&mask]++
			}
		})
		first := (src[0] >> d.shift) & mask
		total := 0
		for j := range counts {
			total += counts[j][first]
		}
		if total == n {
			continue // one digit for all: nothing moves
		}
		// Chunk j's run of digit b starts after every smaller digit and
		// after chunk j' < j's run of b: the serial scatter's positions.
		at := 0
		for b := uint64(0); b <= mask; b++ {
			for j := range counts {
				m := counts[j][b]
				counts[j][b] = at
				at += m
			}
		}
		chunks(w, n, func(j, lo, hi int) {
			cnt := &counts[j]
			for _, k := range src[lo:hi] {
				b := (k >> d.shift) & mask
				dst[cnt[b]] = k
				cnt[b]++
			}
		})
		src, dst = dst, src
	}
	chunks(w, n, func(_, lo, hi int) {
		for i, k := range src[lo:hi] {
			id := int(uint32(k))
			c[lo+i] = candidate{id, logits[id]}
		}
	})
	return keys
}

// parallelMin is the candidate count from which radixDesc and the softmax
// split their passes over goroutines (a 128k vocabulary: ~4 ms a token on
// one core); maxWorkers caps the goroutines.
var (
	parallelMin = 1 << 14
	maxWorkers  = 8
)

// workers is how many goroutines a pass over n candidates uses.
func workers(n int) int {
	if n < parallelMin {
		return 1
	}
	return max(1, min(maxWorkers, runtime.GOMAXPROCS(0), n/(parallelMin/4)))
}

// chunks splits [0, n) into w contiguous chunks and runs f(j, lo, hi)
// for each, on w goroutines when w > 1; it returns when all are done.
func chunks(w, n int, f func(j, lo, hi int)) {
	size := (n + w - 1) / w
	run := func(j int) { f(j, min(j*size, n), min((j+1)*size, n)) }
	if w == 1 {
		run(0)
		return
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for j := 1; j < w; j++ {
		go func() {
			defer wg.Done()
			run(j)
		}()
	}
	run(0)
	wg.Wait()
}

// New returns a sampler seeded from p.Seed.
func New(p Params) *Sampler {
	return &Sampler{p: p, state: p.Seed ^ 0x9E3779B97F4A7C15}
}

// next is splitmix64: small, fast, and identical everywhere.
func (s *Sampler) next() uint64 {
	s.state += 0x9E3779B97F4A7C15
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (s *Sampler) uniform() float64 { return float64(s.next()>>11) / (1 << 53) }

// Argmax returns the index of the largest logit (the lowest index on ties).
func Argmax(logits []float32) int {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range logits {
		if v > best {
			best, bi = v, i
		}
	}
	return bi
}

// Penalize applies the repetition, presence and frequency penalties of p
// to logits in place, looking at the tail of history.
func Penalize(logits []float32, history []int, p Params) {
	rp := p.RepeatPenalty
	if (rp == 0 || rp == 1) && p.PresencePenalty == 0 && p.FrequencyPenalty == 0 {
		return
	}
	n := p.RepeatLastN
	if n == 0 {
		n = 64
	}
	if n > 0 && len(history) > n {
		history = history[len(history)-n:]
	}
	counts := make(map[int]int, len(history))
	for _, id := range history {
		if id >= 0 && id < len(logits) {
			counts[id]++
		}
	}
	for id, c := range counts {
		v := logits[id]
		if rp != 0 && rp != 1 {
			if v > 0 {
				v /= rp
			} else {
				v *= rp
			}
		}
		v -= float32(c)*p.FrequencyPenalty + p.PresencePenalty
		logits[id] = v
	}
}

// Sample picks the next id. logits is modified (penalties, scaling).
func (s *Sampler) Sample(logits []float32, history []int) int {
	c, probs, keep, ok := s.dist(logits, history)
	if !ok {
		return Argmax(logits)
	}
	var total float64
	for i := 0; i < keep; i++ {
		total += probs[i]
	}
	r := s.uniform() * total
	for i := 0; i < keep; i++ {
		r -= probs[i]
		if r < 0 {
			return c[i].id
		}
	}
	return c[keep-1].id
}

// dist computes the candidates Sample draws from, best first, with their
// probabilities (probs[:keep], not renormalized after the cut). ok is
// false for greedy params and when no logit is finite: Sample takes the
// argmax then.
func (s *Sampler) dist(logits []float32, history []int) (c []candidate, probs []float64, keep int, ok bool) {
	p := s.p
	Penalize(logits, history, p)
	if p.Greedy() {
		return nil, nil, 0, false
	}
	// Order descending by logit (the order temperature scaling keeps),
	// ties by id, so the result does not depend on sort stability: only
	// the top k when top-k cuts (one heap pass over the logits), else
	// every finite candidate (a radix sort: a comparison sort of a 128k
	// vocabulary took ~50 ms a token).
	if k := p.TopK; k > 0 && k <= heapTopK {
		c = topK(logits, k, s.cand[:0])
	} else {
		c = s.cand[:0]
		for i, v := range logits {
			if finite(v) {
				c = append(c, candidate{i, v})
			}
		}
		if len(c) > 0 {
			s.keys = radixDesc(c, logits, s.keys)
		}
		if k > 0 && k < len(c) {
			c = c[:k]
		}
	}
	s.cand = c
	if len(c) == 0 {
		return nil, nil, 0, false
	}
	// Softmax over the survivors at the temperature, in float64 so that a
	// tiny temperature saturates to 0 and 1 instead of overflowing to NaN.
	maxv := float64(c[0].v)
	invT := 1 / float64(p.Temperature)
	if cap(s.probs) < len(c) {
		s.probs = make([]float64, len(c))
	}
	probs = s.probs[:len(c)]
	// Each exponential is its own (computed on as many goroutines as the
	// candidates warrant); the sum runs in the candidates' order, so the
	// bits do not depend on the split.
	w := workers(len(c))
	chunks(w, len(c), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			probs[i] = math.Exp((float64(c[i].v) - maxv) * invT)
		}
	})
	var sum float64
	for _, e := range probs {
		sum += e
	}
	chunks(w, len(c), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			probs[i] /= sum
		}
	})
	keep = len(c)
	if p.MinP > 0 {
		th := probs[0] * float64(p.MinP)
		for i := 1; i < keep; i++ {
			if probs[i] < th {
				keep = i
				break
			}
		}
	}
	if p.TopP > 0 && p.TopP < 1 {
		var cum float64
		for i := 0; i < keep; i++ {
			cum += probs[i]
			if cum >= float64(p.TopP) {
				keep = i + 1
				break
			}
		}
	}
	return c, probs, keep, true
}

// Dist is a distribution over token ids: P[i] is the probability of
// IDs[i]; ids absent have probability 0.
type Dist struct {
	IDs []int
	P   []float64
}

// Prob is the probability of id.
func (d Dist) Prob(id int) float64 {
	for i, x := range d.IDs {
		if x == id {
			return d.P[i]
		}
	}
	return 0
}

// Dist is the distribution Sample draws from for these logits and
// history (the argmax with probability 1 for greedy params), normalized.
// logits is modified as Sample modifies it.
func (s *Sampler) Dist(logits []float32, history []int) Dist {
	c, probs, keep, ok := s.dist(logits, history)
	if !ok {
		return Dist{IDs: []int{Argmax(logits)}, P: []float64{1}}
	}
	var total float64
	for i := 0; i < keep; i++ {
		total += probs[i]
	}
	d := Dist{IDs: make([]int, keep), P: make([]float64, keep)}
	for i := 0; i < keep; i++ {
		d.IDs[i], d.P[i] = c[i].id, probs[i]/total
	}
	return d
}

// Draw picks an id from d with the sampler's generator (d's first id
// when its probabilities sum to zero).
func (s *Sampler) Draw(d Dist) int {
	var total float64
	for _, p := range d.P {
		total += p
	}
	if total <= 0 || len(d.IDs) == 1 {
		return d.IDs[0]
	}
	r := s.uniform() * total
	for i, p := range d.P {
		r -= p
		if r < 0 {
			return d.IDs[i]
		}
	}
	return d.IDs[len(d.IDs)-1]
}

// Uniform is the next number in [0, 1) of the sampler's generator.
func (s *Sampler) Uniform() float64 { return s.uniform() }

package cpu

import (
	"math"
	"sync"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
)

// attention runs softmax attention for n new tokens of layer i and returns
// the projected output [n, hidden].
func (s *Session) attention(i int, w *attnWeights, h []float32, n int) []float32 {
	at := w.spec
	a := s.b.arch
	H, hd := a.Hidden, at.HeadDim
	qDim, kvDim := at.Heads*hd, at.KVHeads*hd
	qRows := qDim
	if at.OutputGate {
		qRows *= 2
	}

	q := s.tmp.out(n * qRows)
	k := s.tmp.out(n * kvDim)
	v := s.tmp.out(n * kvDim)
	kernel.MatMuls(h, n, kernel.Product{Y: q, W: w.q}, kernel.Product{Y: k, W: w.k}, kernel.Product{Y: v, W: w.v})

	// The output gate (qwen3_next) is interleaved per head with the query:
	// [q_h (hd), gate_h (hd)]. Separate them.
	var gate []float32
	if at.OutputGate {
		qq := s.tmp.get(n * qDim)
		gate = s.tmp.get(n * qDim)
		for t := range n {
			for hh := range at.Heads {
				src := q[t*qRows+hh*2*hd:]
				copy(qq[t*qDim+hh*hd:t*qDim+(hh+1)*hd], src[:hd])
				copy(gate[t*qDim+hh*hd:t*qDim+(hh+1)*hd], src[hd:2*hd])
			}
		}
		q = qq
	}

	cache := s.caches[i]
	cache.ensure(s.pos + n)
	att := s.tmp.get(n * qDim)
	cos, sin := s.ropeFor(w.rope, n)
	// A ring cache takes the step in pieces that fit it: a piece's rows
	// overwrite only positions before the window of its first query.
	piece := n
	if cache.ring > 0 {
		piece = cache.ring - at.Window + 1
	}
	for t0 := 0; t0 < n; t0 += piece {
		t1 := min(n, t0+piece)
		if t1-t0 == 1 {
			s.prepToken(w, cache, q, k, v, t0, cos, sin)
		} else {
			q := q
			parallelTokens(t1-t0, func(lo, hi int) {
				for t := t0 + lo; t < t0+hi; t++ {
					s.prepToken(w, cache, q, k, v, t, cos, sin)
				}
			})
		}
		s.attend(at, w.sinks, cache, q, att, t0, t1)
	}

	if gate != nil {
		for j, g := range gate {
			att[j] *= float32(1 / (1 + math.Exp(-float64(g))))
		}
	}
	out := s.tmp.out(n * H)
	kernel.MatMul(out, w.o, att, n)
	if w.ob != nil {
		for t := range n {
			kernel.Add(out[t*H:(t+1)*H], w.ob)
		}
	}
	return out
}

// prepToken readies the step's token t for attention: the q/k/v biases,
// the q/k norms and RoPE (cos and sin: the step's rows, ropeFor) on its
// query and key, whose key and value then go to the cache.
func (s *Session) prepToken(w *attnWeights, cache *kvCache, q, k, v []float32, t int, cos, sin []float32) {
	at, a := w.spec, s.b.arch
	hd := at.HeadDim
	qDim, kvDim := at.Heads*hd, at.KVHeads*hd
	plusOne := a.Norm == model.NormRMSPlusOne
	qt, kt, vt := q[t*qDim:(t+1)*qDim], k[t*kvDim:(t+1)*kvDim], v[t*kvDim:(t+1)*kvDim]
	if w.qb != nil {
		kernel.Add(qt, w.qb)
		kernel.Add(kt, w.kb)
		kernel.Add(vt, w.vb)
	}
	switch at.QKNorm {
	case model.QKNormPerHead:
		for hh := range at.Heads {
			r := qt[hh*hd : (hh+1)*hd]
			kernel.RMSNorm(r, r, w.qNorm, a.NormEps, plusOne)
		}
		for hh := range at.KVHeads {
			r := kt[hh*hd : (hh+1)*hd]
			kernel.RMSNorm(r, r, w.kNorm, a.NormEps, plusOne)
		}
	case model.QKNormFull:
		kernel.RMSNorm(qt, qt, w.qNorm, a.NormEps, plusOne)
		kernel.RMSNorm(kt, kt, w.kNorm, a.NormEps, plusOne)
	}
	half := w.rope.Dims / 2
	c, sn := cos[t*half:(t+1)*half], sin[t*half:(t+1)*half]
	rotate(w.rope, qt, at.Heads, hd, c, sn)
	rotate(w.rope, kt, at.KVHeads, hd, c, sn)
	cache.put(s.pos+t, kt, vt)
}

// parallelTokens runs fn over [0, n) on the kernels' workers when n > 1:
// a prefill step's per-token work (norms, RoPE, the gated activation),
// which on one thread would leave the other cores idle between the
// parallel products.
func parallelTokens(n int, fn func(lo, hi int)) {
	if n > 1 {
		kernel.ParallelFor(n, 1, fn)
		return
	}
	fn(0, n)
}

// attend computes softmax attention for the step's tokens [t0, t1) (at
// positions s.pos+t) over the cache, into att; a head's sink logit
// (gpt-oss), when sinks is not nil, joins its softmax's denominator.
func (s *Session) attend(at *model.Attention, sinks []float32, cache *kvCache, q, att []float32, t0, t1 int) {
	hd := at.HeadDim
	qDim := at.Heads * hd
	group := at.Heads / at.KVHeads
	n := t1 - t0
	// Small problems (a decode step over a short context) run inline:
	// starting goroutines would cost more than the work.
	run := parallel
	if n*at.Heads*(s.pos+t1)*hd < 1<<18 {
		run = func(n int, fn func(lo, hi int, scratch []float32), scratchLen int) {
			fn(0, n, s.tmp.get(scratchLen))
		}
	}
	// One (token, head) pair per task.
	run(n*at.Heads, func(lo, hi int, scratch []float32) {
		for task := lo; task < hi; task++ {
			t, hh := t0+task/at.Heads, task%at.Heads
			pos := s.pos + t
			first := 0
			if at.Window > 0 {
				first = max(0, pos-at.Window+1)
			}
			qh := q[t*qDim+hh*hd : t*qDim+(hh+1)*hd]
			kvOff := (hh / group) * hd
			kbuf, vbuf := scratch[s.maxLen:s.maxLen+hd], scratch[s.maxLen+hd:]
			sc := scratch[:pos+1-first]
			// A float32 cache holds the rows in at most two runs (a
			// ring wraps once): one DotRows call per run.
			r0, n0 := cache.row(first)+kvOff, len(sc)
			if cache.ring > 0 {
				n0 = min(n0, cache.ring-first%cache.ring)
			}
			if !cache.f16 {
				kernel.DotRows(sc[:n0], qh, cache.k[r0:], cache.width)
				kernel.DotRows(sc[n0:], qh, cache.k[kvOff:], cache.width)
				for j := range sc {
					sc[j] *= at.Scale
				}
			} else {
				for j := range sc {
					kj, _ := cache.get(first+j, kvOff, hd, kbuf, vbuf)
					sc[j] = kernel.Dot(qh, kj) * at.Scale
				}
			}
			if c := at.Softcap; c > 0 {
				for j, x := range sc {
					sc[j] = float32(math.Tanh(float64(x/c))) * c
				}
			}
			if sinks != nil {
				kernel.SoftmaxSink(sc, sinks[hh])
			} else {
				kernel.Softmax(sc)
			}
			out := att[t*qDim+hh*hd : t*qDim+(hh+1)*hd]
			clear(out)
			if !cache.f16 {
				kernel.AxpyRows(out, sc[:n0], cache.v[r0:], cache.width)
				kernel.AxpyRows(out, sc[n0:], cache.v[kvOff:], cache.width)
				continue
			}
			for j, p := range sc {
				_, vj := cache.get(first+j, kvOff, hd, kbuf, vbuf)
				kernel.Axpy(out, p, vj)
			}
		}
	}, s.maxLen+2*hd)
}

// parallel splits [0, n) over the kernels' workers (kernel.ParallelFor);
// each chunk gets a scratch buffer of scratchLen floats (stale contents).
// Workers claim chunks as they go, long first and short last: causal
// attention's tasks grow with the token's position, so equal static
// shares would leave the first worker idle half the time.
func parallel(n int, fn func(lo, hi int, scratch []float32), scratchLen int) {
	if kernel.Workers() <= 1 || n <= 1 {
		fn(0, n, make([]float32, scratchLen))
		return
	}
	kernel.ParallelFor(n, 1, func(lo, hi int) {
		bp, _ := scratchPool.Get().(*[]float32)
		if bp == nil || cap(*bp) < scratchLen {
			b := make([]float32, scratchLen)
			bp = &b
		}
		fn(lo, hi, (*bp)[:scratchLen])
		scratchPool.Put(bp)
	})
}

// scratchPool recycles parallel's scratch buffers.
var scratchPool sync.Pool

package cpu

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// deltaWeights is qwen3_next's gated DeltaNet (linear attention with a
// delta-rule state update), in transformers' weight layout.
//
// Per token: q, k, v, z, b, a come from two projections (grouped per key
// head); q, k, v go through a causal depthwise conv + SiLU; each value head
// keeps a [keyDim, valueDim] state S:
//
//	S = exp(g)·S;  S += k ⊗ β(v − Sᵀk);  o = Sᵀq
//
// with g = −exp(A_log)·softplus(a + dt_bias), β = sigmoid(b), q and k
// L2-normalized (q also scaled by 1/√keyDim). o is RMS-normed, gated by
// SiLU(z) and projected out.
type deltaWeights struct {
	spec    *model.GatedDelta
	qkvz    *tensor.Tensor // [2*kh*kd + 2*vh*vd, H]
	ba      *tensor.Tensor // [2*vh, H]
	out     *tensor.Tensor // [H, vh*vd]
	taps    []float32      // [convDim, K]
	dtBias  []float32      // [vh]
	negA    []float32      // -exp(A_log) [vh]
	normW   []float32      // [vd]
	convDim int
}

func loadGatedDelta(w *weightGetter, i int, d *model.GatedDelta, hidden int) *deltaWeights {
	name := func(s string) string { return model.LayerTensor(i, s) }
	if d.KeyHeads <= 0 || d.ValueHeads%d.KeyHeads != 0 || d.KeyDim <= 0 || d.ValueDim <= 0 || d.ConvKernel <= 0 {
		w.fail(fmt.Errorf("cpu: layer %d: bad gated-delta spec %+v", i, *d))
		return nil
	}
	kd, vd := d.KeyHeads*d.KeyDim, d.ValueHeads*d.ValueDim
	dw := &deltaWeights{
		spec:    d,
		convDim: 2*kd + vd,
		qkvz:    w.matrix(name(model.DeltaQKVZ), 2*kd+2*vd, hidden),
		ba:      w.matrix(name(model.DeltaBA), 2*d.ValueHeads, hidden),
		out:     w.matrix(name(model.DeltaOut), hidden, vd),
		dtBias:  w.vector(name(model.DeltaDTBias), d.ValueHeads),
		normW:   w.vector(name(model.DeltaNorm), d.ValueDim),
	}
	dw.taps = w.vector(name(model.DeltaConv), dw.convDim*d.ConvKernel)
	aLog := w.vector(name(model.DeltaALog), d.ValueHeads)
	dw.negA = make([]float32, len(aLog))
	for j, v := range aLog {
		dw.negA[j] = -float32(math.Exp(float64(v)))
	}
	return dw
}

// deltaState is one session's recurrent state for a gated-DeltaNet layer,
// per length (see ring).
type deltaState struct {
	conv ring // the last K-1 conv inputs [K-1, convDim]
	s    ring // [vh, kd, vd]
}

func newDeltaState(dw *deltaWeights, slots int) *deltaState {
	d := dw.spec
	return &deltaState{
		conv: newRing(slots, (d.ConvKernel-1)*dw.convDim),
		s:    newRing(slots, d.ValueHeads*d.KeyDim*d.ValueDim),
	}
}

func (st *deltaState) reset() {
	st.conv.reset()
	st.s.reset()
}

func (s *Session) gatedDelta(dw *deltaWeights, st *deltaState, h []float32, n int) []float32 {
	a := s.b.arch
	d := dw.spec
	H := a.Hidden
	kh, vh, dk, dv, K := d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim, d.ConvKernel
	r := vh / kh
	kd, vd := kh*dk, vh*dv
	C := dw.convDim
	rowQKVZ := 2*kd + 2*vd

	qkvz := make([]float32, n*rowQKVZ)
	ba := make([]float32, n*2*vh)
	kernel.MatMul(qkvz, dw.qkvz, h, n)
	kernel.MatMul(ba, dw.ba, h, n)

	// Regroup into the conv input [q | k | v] and the gate z, per token.
	hist := make([]float32, (K-1+n)*C)
	if s.pos > 0 {
		copy(hist, st.conv.at(s.pos))
	}
	z := make([]float32, n*vd)
	beta := make([]float32, n*vh)
	gdec := make([]float32, n*vh)
	group := 2*dk + 2*r*dv
	for t := range n {
		src := qkvz[t*rowQKVZ : (t+1)*rowQKVZ]
		mix := hist[(K-1+t)*C : (K+t)*C]
		for g := range kh {
			blk := src[g*group : (g+1)*group]
			copy(mix[g*dk:(g+1)*dk], blk[:dk])
			copy(mix[kd+g*dk:kd+(g+1)*dk], blk[dk:2*dk])
			copy(mix[2*kd+g*r*dv:2*kd+(g+1)*r*dv], blk[2*dk:2*dk+r*dv])
			copy(z[t*vd+g*r*dv:t*vd+(g+1)*r*dv], blk[2*dk+r*dv:])
			bab := ba[t*2*vh+g*2*r : t*2*vh+(g+1)*2*r]
			for j := range r {
				vi := g*r + j
				beta[t*vh+vi] = float32(1 / (1 + math.Exp(-float64(bab[j]))))
				gdec[t*vh+vi] = dw.negA[vi] * softplus(bab[r+j]+dw.dtBias[vi])
			}
		}
	}

	// Causal depthwise conv + SiLU.
	conv := make([]float32, n*C)
	for t := range n {
		for c := range C {
			var acc float32
			for j := range K {
				acc += dw.taps[c*K+j] * hist[(t+j)*C+c]
			}
			conv[t*C+c] = acc
		}
		kernel.SiLU(conv[t*C : (t+1)*C])
	}
	for t := max(0, n-len(st.conv)); t < n; t++ {
		copy(st.conv.at(s.pos+t+1), hist[(t+1)*C:(t+K)*C])
	}

	// The recurrence, token by token; value heads are independent. The
	// state of each of the last len(st.s) tokens goes to its own slot;
	// earlier tokens update a scratch copy.
	o := make([]float32, n*vd)
	scale := float32(1 / math.Sqrt(float64(dk)))
	pos, tail := s.pos, max(0, n-len(st.s))
	parallel(vh, func(lo, hi int, scratch []float32) {
		qn, kn, mem := scratch[:dk], scratch[dk:2*dk], scratch[2*dk:2*dk+dv]
		work := scratch[2*dk+dv:]
		for vi := lo; vi < hi; vi++ {
			g := vi / r
			hs := func(L int) []float32 { return st.s.at(L)[vi*dk*dv : (vi+1)*dk*dv] }
			var S []float32
			if pos > 0 {
				S = hs(pos)
			} else {
				S = work
				clear(S)
			}
			for t := range n {
				if t >= tail {
					dst := hs(pos + t + 1)
					copy(dst, S)
					S = dst
				} else if &S[0] != &work[0] {
					copy(work, S)
					S = work
				}
				row := conv[t*C : (t+1)*C]
				l2norm(qn, row[g*dk:(g+1)*dk])
				kernel.Scale(qn, scale)
				l2norm(kn, row[kd+g*dk:kd+(g+1)*dk])
				v := row[2*kd+vi*dv : 2*kd+(vi+1)*dv]
				decay := float32(math.Exp(float64(gdec[t*vh+vi])))
				kernel.Scale(S, decay)
				clear(mem)
				for i := range dk {
					kernel.Axpy(mem, kn[i], S[i*dv:(i+1)*dv])
				}
				b := beta[t*vh+vi]
				for j := range dv {
					mem[j] = (v[j] - mem[j]) * b
				}
				for i := range dk {
					kernel.Axpy(S[i*dv:(i+1)*dv], kn[i], mem)
				}
				out := o[t*vd+vi*dv : t*vd+(vi+1)*dv]
				clear(out)
				for i := range dk {
					kernel.Axpy(out, qn[i], S[i*dv:(i+1)*dv])
				}
				// Gated RMSNorm: norm(o)·w·SiLU(z).
				kernel.RMSNorm(out, out, dw.normW, a.NormEps, false)
				zz := z[t*vd+vi*dv : t*vd+(vi+1)*dv]
				for j := range out {
					zj := zz[j]
					out[j] *= zj / (1 + float32(math.Exp(float64(-zj))))
				}
			}
		}
	}, 2*dk+dv+dk*dv)

	res := make([]float32, n*H)
	kernel.MatMul(res, dw.out, o, n)
	return res
}

// softplus is log(1+exp(x)), linear above 20 as in torch.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// l2norm writes x·rsqrt(Σx² + 1e-6) into dst.
func l2norm(dst, x []float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	inv := float32(1 / math.Sqrt(float64(ss)+1e-6))
	for i, v := range x {
		dst[i] = v * inv
	}
}

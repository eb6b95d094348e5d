package cpu

import (
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// convWeights is LFM2's gated short convolution:
//
//	B, C, x = in_proj(h);  y = C ⊙ causalconv(B ⊙ x);  out = out_proj(y)
//
// with a depthwise causal convolution of Kernel taps per channel.
type convWeights struct {
	spec      *model.ShortConv
	in, out   *tensor.Tensor // [3H, H], [H, H]
	taps      []float32      // [H, K]
	bias      []float32      // conv bias [H] or nil
	inB, outB []float32      // projection biases or nil
}

func loadShortConv(w *weightGetter, i int, c *model.ShortConv, hidden int) *convWeights {
	name := func(s string) string { return model.LayerTensor(i, s) }
	cw := &convWeights{
		spec: c,
		in:   w.matrix(name(model.ShortConvIn), 3*hidden, hidden),
		out:  w.matrix(name(model.ShortConvOut), hidden, hidden),
		taps: w.vector(name(model.ShortConvWeight), hidden*c.Kernel),
	}
	opt := func(s string, n int) []float32 {
		if _, ok := w.w.Tensor(name(s)); ok {
			return w.vector(name(s), n)
		}
		if err := model.WeightsErr(w.w); err != nil {
			w.fail(err) // present but unreadable or damaged, not absent
		}
		return nil
	}
	cw.bias = opt(model.ShortConvBias, hidden)
	cw.inB = opt(model.ShortConvInBias, 3*hidden)
	cw.outB = opt(model.ShortConvOutB, hidden)
	return cw
}

// shortConv runs the mixer for n tokens at positions s.pos... state holds
// the last Kernel-1 gated inputs B⊙x of the sequence (zeros before the
// first token), per length (see ring).
func (s *Session) shortConv(cw *convWeights, state ring, h []float32, n int) []float32 {
	H := s.b.arch.Hidden
	K := cw.spec.Kernel
	bcx := make([]float32, n*3*H)
	kernel.MatMul(bcx, cw.in, h, n)
	// hist holds the K-1 past gated inputs followed by the n new ones.
	hist := make([]float32, (K-1+n)*H)
	if s.pos > 0 {
		copy(hist, state.at(s.pos))
	}
	for t := range n {
		row := bcx[t*3*H : (t+1)*3*H]
		if cw.inB != nil {
			kernel.Add(row, cw.inB)
		}
		bx := hist[(K-1+t)*H : (K+t)*H]
		for c := range H {
			bx[c] = row[c] * row[2*H+c]
		}
	}
	y := make([]float32, n*H)
	for t := range n {
		C := bcx[t*3*H+H : t*3*H+2*H]
		for c := range H {
			var acc float32
			if cw.bias != nil {
				acc = cw.bias[c]
			}
			for j := range K {
				acc += cw.taps[c*K+j] * hist[(t+j)*H+c]
			}
			y[t*H+c] = C[c] * acc
		}
	}
	for t := max(0, n-len(state)); t < n; t++ {
		copy(state.at(s.pos+t+1), hist[(t+1)*H:(t+K)*H])
	}
	out := make([]float32, n*H)
	kernel.MatMul(out, cw.out, y, n)
	if cw.outB != nil {
		for t := range n {
			kernel.Add(out[t*H:(t+1)*H], cw.outB)
		}
	}
	return out
}

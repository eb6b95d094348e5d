package cpu

import (
	"fmt"
	"math"
	"sort"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// moeWeights is a routed mixture of experts. The banks are [E, out, in];
// each expert's slice is kept as its own [out, in] view so that a batch of
// tokens routed to one expert goes through a single MatMul.
type moeWeights struct {
	spec           *model.MoE
	router         *tensor.Tensor // [E, hidden]
	selectBias     []float32      // [E] or nil
	routerBias     []float32      // [E] or nil, added to the router logits
	gateB, upB     []float32      // [E, expert_hidden] expert biases, nil when none
	downB          []float32      // [E, hidden]
	gate, up, down []*tensor.Tensor
	shGate, shUp   *tensor.Tensor // shared expert, nil when none
	shDown         *tensor.Tensor
	shGateInp      *tensor.Tensor // [1, hidden] sigmoid gate of the shared expert
}

func loadMoE(w *weightGetter, i int, m *model.MoE, hidden int) *moeWeights {
	name := func(s string) string { return model.LayerTensor(i, s) }
	E, I := m.Experts, m.ExpertHidden
	mw := &moeWeights{spec: m, router: w.matrix(name(model.FFNRouter), E, hidden)}
	if I <= 0 || m.SharedHidden < 0 {
		w.fail(fmt.Errorf("cpu: layer %d: MoE expert width %d, shared width %d", i, I, m.SharedHidden))
		return mw
	}
	switch m.Scoring {
	case "softmax", "":
	case "sigmoid", "topk_softmax":
	default:
		w.fail(fmt.Errorf("cpu: layer %d: MoE scoring %q not supported", i, m.Scoring))
	}
	if m.SelectBias {
		mw.selectBias = w.vector(name(model.FFNRouterBias), E)
	}
	if m.RouterBias {
		mw.routerBias = w.vector(name(model.FFNRouterB), E)
	}
	if m.ExpertBias {
		mw.gateB = w.vector(name(model.FFNGateExpsB), E*I)
		mw.upB = w.vector(name(model.FFNUpExpsB), E*I)
		mw.downB = w.vector(name(model.FFNDownExpsB), E*hidden)
	}
	views := func(canon string, out, in int) []*tensor.Tensor {
		t := w.tensor(name(canon), E, out, in)
		if t == nil {
			return nil
		}
		rb, _ := t.Codec.RowBytes(in)
		v := make([]*tensor.Tensor, E)
		for e := range v {
			v[e] = &tensor.Tensor{Name: fmt.Sprintf("%s[%d]", t.Name, e), Codec: t.Codec, Shape: []int{out, in},
				Data: t.Data[e*out*rb : (e+1)*out*rb], Side: tensor.MatrixSide(t, e)}
		}
		return v
	}
	mw.gate = views(model.FFNGateExps, I, hidden)
	mw.up = views(model.FFNUpExps, I, hidden)
	mw.down = views(model.FFNDownExps, hidden, I)
	if m.SharedHidden > 0 {
		S := m.SharedHidden
		mw.shGate = w.matrix(name(model.FFNGateShexp), S, hidden)
		mw.shUp = w.matrix(name(model.FFNUpShexp), S, hidden)
		mw.shDown = w.matrix(name(model.FFNDownShexp), hidden, S)
		if m.SharedGate {
			mw.shGateInp = w.matrix(name(model.FFNShexpGate), 1, hidden)
		}
	}
	return mw
}

// moeFFN routes every token to its top-k experts and sums their outputs
// weighted by the router, plus the shared expert when there is one.
func (s *Session) moeFFN(mw *moeWeights, h []float32, n int) []float32 {
	a := s.b.arch
	H := a.Hidden
	m := mw.spec
	E, I := m.Experts, m.ExpertHidden

	// Router probabilities and each token's selection.
	logits := make([]float32, n*E)
	kernel.MatMul(logits, mw.router, h, n)
	type pick struct {
		tok int
		w   float32
	}
	perExpert := make([][]pick, E)
	idx := make([]int, E)
	for t := range n {
		p := logits[t*E : (t+1)*E]
		if mw.routerBias != nil {
			kernel.Add(p, mw.routerBias)
		}
		if m.Scoring == "topk_softmax" {
			// gpt-oss: top-k of the logits (ties to the lower index, as
			// torch.topk), softmax over those k.
			for e := range idx {
				idx[e] = e
			}
			sort.SliceStable(idx, func(x, y int) bool { return p[idx[x]] > p[idx[y]] })
			sel := idx[:m.TopK]
			w := make([]float32, len(sel))
			for j, e := range sel {
				w[j] = p[e]
			}
			kernel.Softmax(w)
			for j, e := range sel {
				wt := w[j]
				wt *= m.Routed()
				perExpert[e] = append(perExpert[e], pick{t, wt})
			}
			continue
		}
		if m.Scoring == "sigmoid" {
			for e, v := range p {
				p[e] = float32(1 / (1 + math.Exp(-float64(v))))
			}
		} else {
			kernel.Softmax(p)
		}
		for e := range idx {
			idx[e] = e
		}
		score := func(e int) float32 {
			if mw.selectBias != nil {
				return p[e] + mw.selectBias[e]
			}
			return p[e]
		}
		sort.SliceStable(idx, func(x, y int) bool { return score(idx[x]) > score(idx[y]) })
		sel := idx[:m.TopK]
		var sum float32
		for _, e := range sel {
			sum += p[e]
		}
		for _, e := range sel {
			wt := p[e]
			if m.NormTopK {
				wt /= sum
			}
			wt *= m.Routed()
			perExpert[e] = append(perExpert[e], pick{t, wt})
		}
	}

	// Experts in index order, each over the tokens routed to it, as
	// transformers accumulates them.
	out := make([]float32, n*H)
	for e, picks := range perExpert {
		if len(picks) == 0 {
			continue
		}
		k := len(picks)
		x := make([]float32, k*H)
		for j, p := range picks {
			copy(x[j*H:(j+1)*H], h[p.tok*H:(p.tok+1)*H])
		}
		g := make([]float32, k*I)
		u := make([]float32, k*I)
		kernel.MatMul(g, mw.gate[e], x, k)
		kernel.MatMul(u, mw.up[e], x, k)
		if mw.gateB != nil {
			for j := range k {
				kernel.Add(g[j*I:(j+1)*I], mw.gateB[e*I:(e+1)*I])
				kernel.Add(u[j*I:(j+1)*I], mw.upB[e*I:(e+1)*I])
			}
		}
		gated(a, g, u)
		y := make([]float32, k*H)
		kernel.MatMul(y, mw.down[e], g, k)
		if mw.downB != nil {
			for j := range k {
				kernel.Add(y[j*H:(j+1)*H], mw.downB[e*H:(e+1)*H])
			}
		}
		for j, p := range picks {
			yr := y[j*H : (j+1)*H]
			kernel.Scale(yr, p.w)
			kernel.Add(out[p.tok*H:(p.tok+1)*H], yr)
		}
	}

	if mw.shGate != nil {
		S := m.SharedHidden
		g := make([]float32, n*S)
		u := make([]float32, n*S)
		kernel.MatMul(g, mw.shGate, h, n)
		kernel.MatMul(u, mw.shUp, h, n)
		gated(a, g, u)
		y := make([]float32, n*H)
		kernel.MatMul(y, mw.shDown, g, n)
		var gates []float32
		if mw.shGateInp != nil {
			gates = make([]float32, n)
			kernel.MatMul(gates, mw.shGateInp, h, n)
		}
		for t := range n {
			yr := y[t*H : (t+1)*H]
			if gates != nil {
				kernel.Scale(yr, float32(1/(1+math.Exp(-float64(gates[t])))))
			}
			kernel.Add(out[t*H:(t+1)*H], yr)
		}
	}
	return out
}

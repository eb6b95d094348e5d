package webgpu

import (
	"fmt"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// dmoe is a routed mixture-of-experts FFN resident on the device. Routing
// (router matmul, scoring, top-k, weights) runs on the device in the step's
// command buffer; the expert kernels read only the picked experts' rows of
// the stacked banks.
type dmoe struct {
	spec    *model.MoE
	router  *dweight    // [E, hidden]
	selBias *gpu.Buffer // [E] or nil
	gu      *dweight    // [E*2I, hidden]: per expert its gate rows, then its up rows
	down    *dweight    // [E*hidden, I]
	rBias   *gpu.Buffer // [E] router bias, or nil
	guBias  *gpu.Buffer // per expert [gate bias; up bias] ([E, 2I]), or nil
	dBias   *gpu.Buffer // [E, hidden], or nil
	shGU    *dweight    // shared expert [gate; up] or nil
	shDown  *dweight
	shGate  *dweight // [1, hidden] or nil
}

func checkMoE(i int, m *model.MoE, a *model.Arch) error {
	if a.Act == model.ActSwiGLUOAI && m.SharedHidden > 0 {
		return fmt.Errorf("webgpu: %w: layer %d shared expert with the %s activation", ErrUnsupported, i, a.Act)
	}
	switch m.Scoring {
	case "", "softmax", "sigmoid", "topk_softmax":
	default:
		return fmt.Errorf("webgpu: %w: layer %d MoE scoring %q", ErrUnsupported, i, m.Scoring)
	}
	if m.ExpertHidden <= 0 || m.ExpertHidden%4 != 0 || m.SharedHidden%4 != 0 {
		return fmt.Errorf("webgpu: %w: layer %d MoE widths %d/%d", ErrUnsupported, i, m.ExpertHidden, m.SharedHidden)
	}
	if m.ExpertHidden > 65535 || a.Hidden > 65535 || m.Experts > 65535 {
		return fmt.Errorf("webgpu: %w: layer %d MoE dims exceed one grid dimension", ErrUnsupported, i)
	}
	if int64(m.Experts)*int64(2*m.ExpertHidden)*int64(a.Hidden) >= 1<<32 {
		return fmt.Errorf("webgpu: %w: layer %d expert bank exceeds 2^32 elements", ErrUnsupported, i)
	}
	return nil
}

// routeScoring is moe_route's scoring code.
func routeScoring(s string) int {
	switch s {
	case "sigmoid":
		return 1
	case "topk_softmax":
		return 2
	}
	return 0
}

// expertViews splits a stacked [E, out, in] bank into E [out, in] tensors.
func expertViews(t *tensor.Tensor, e, out, in int) ([]*tensor.Tensor, error) {
	if len(t.Shape) != 3 || t.Shape[0] != e || t.Shape[1] != out || t.Shape[2] != in {
		return nil, fmt.Errorf("webgpu: %s shape %v, want [%d %d %d]", t.Name, t.Shape, e, out, in)
	}
	rb, err := t.Codec.RowBytes(in)
	if err != nil {
		return nil, fmt.Errorf("webgpu: %s: %w", t.Name, err)
	}
	if len(t.Data) != e*out*rb {
		return nil, fmt.Errorf("webgpu: %s: %d bytes for shape %v", t.Name, len(t.Data), t.Shape)
	}
	v := make([]*tensor.Tensor, e)
	for k := range v {
		v[k] = &tensor.Tensor{Name: fmt.Sprintf("%s[%d]", t.Name, k), Codec: t.Codec, Shape: []int{out, in},
			Data: t.Data[k*out*rb : (k+1)*out*rb], Side: tensor.MatrixSide(t, k)}
	}
	return v, nil
}

func (b *Backend) loadMoE(m *model.Model, i int, spec *model.MoE) (*dmoe, error) {
	a := b.arch
	H, E, I := a.Hidden, spec.Experts, spec.ExpertHidden
	name := func(s string) string { return model.LayerTensor(i, s) }
	get := func(s string) (*tensor.Tensor, error) { return b.tensor(m, name(s)) }
	dm := &dmoe{spec: spec}
	rt, err := get(model.FFNRouter)
	if err != nil {
		return nil, err
	}
	if rt.Rows() != E || rt.Cols() != H {
		return nil, fmt.Errorf("webgpu: %s shape %v, want [%d %d]", rt.Name, rt.Shape, E, H)
	}
	if dm.router, err = b.uploadWeight(rt.Name, rt); err != nil {
		return nil, err
	}
	if spec.SelectBias {
		if dm.selBias, err = b.uploadVec(m, name(model.FFNRouterBias), E); err != nil {
			return nil, err
		}
	}
	if spec.RouterBias {
		if dm.rBias, err = b.uploadVec(m, name(model.FFNRouterB), E); err != nil {
			return nil, err
		}
	}
	if spec.ExpertBias {
		vec := func(s string, n int) ([]float32, error) {
			t, err := get(s)
			if err != nil {
				return nil, err
			}
			return vectorF32(t, n)
		}
		gb, err := vec(model.FFNGateExpsB, E*I)
		if err != nil {
			return nil, err
		}
		ub, err := vec(model.FFNUpExpsB, E*I)
		if err != nil {
			return nil, err
		}
		db, err := vec(model.FFNDownExpsB, E*H)
		if err != nil {
			return nil, err
		}
		gu := make([]float32, 0, 2*E*I)
		for e := range E {
			gu = append(gu, gb[e*I:(e+1)*I]...)
			gu = append(gu, ub[e*I:(e+1)*I]...)
		}
		if dm.guBias, err = b.uploadF32(name("ffn_gate_up_exps.bias"), gu); err != nil {
			return nil, err
		}
		if dm.dBias, err = b.uploadF32(name(model.FFNDownExpsB), db); err != nil {
			return nil, err
		}
	}
	bank := func(s string, out, in int) ([]*tensor.Tensor, error) {
		t, err := get(s)
		if err != nil {
			return nil, err
		}
		return expertViews(t, E, out, in)
	}
	gv, err := bank(model.FFNGateExps, I, H)
	if err != nil {
		return nil, err
	}
	uv, err := bank(model.FFNUpExps, I, H)
	if err != nil {
		return nil, err
	}
	dv, err := bank(model.FFNDownExps, H, I)
	if err != nil {
		return nil, err
	}
	if !sameCodec(gv[0], uv[0]) {
		return nil, fmt.Errorf("webgpu: %w: layer %d expert gate and up banks differ in codec", ErrUnsupported, i)
	}
	var guv []*tensor.Tensor
	for e := range E {
		guv = append(guv, gv[e], uv[e])
	}
	if dm.gu, err = b.uploadWeight(name("ffn_gate_up_exps"), guv...); err != nil {
		return nil, err
	}
	if dm.down, err = b.uploadWeight(name(model.FFNDownExps), dv...); err != nil {
		return nil, err
	}
	if S := spec.SharedHidden; S > 0 {
		sg, err := get(model.FFNGateShexp)
		if err != nil {
			return nil, err
		}
		su, err := get(model.FFNUpShexp)
		if err != nil {
			return nil, err
		}
		sd, err := get(model.FFNDownShexp)
		if err != nil {
			return nil, err
		}
		if sg.Rows() != S || sg.Cols() != H || su.Rows() != S || su.Cols() != H || sd.Rows() != H || sd.Cols() != S {
			return nil, fmt.Errorf("webgpu: layer %d shared expert shapes %v %v %v", i, sg.Shape, su.Shape, sd.Shape)
		}
		if !sameCodec(sg, su) {
			return nil, fmt.Errorf("webgpu: %w: layer %d shared gate and up differ in codec", ErrUnsupported, i)
		}
		if dm.shGU, err = b.uploadWeight(name("ffn_gate_up_shexp"), sg, su); err != nil {
			return nil, err
		}
		if dm.shDown, err = b.uploadWeight(sd.Name, sd); err != nil {
			return nil, err
		}
		if spec.SharedGate {
			gt, err := get(model.FFNShexpGate)
			if err != nil {
				return nil, err
			}
			if gt.Elements() != H {
				return nil, fmt.Errorf("webgpu: %s shape %v, want [1 %d]", gt.Name, gt.Shape, H)
			}
			if dm.shGate, err = b.uploadWeight(gt.Name, gt); err != nil {
				return nil, err
			}
		}
	}
	return dm, nil
}

// weights lists the device weights (nil entries skipped by callers).
func (dm *dmoe) weights() []*dweight {
	return []*dweight{dm.router, dm.gu, dm.down, dm.shGU, dm.shDown, dm.shGate}
}

// decodeBytes is the weight bytes one token reads: router, k experts,
// shared expert.
func (dm *dmoe) decodeBytes() int64 {
	n := dm.router.bytes
	k, e := int64(dm.spec.TopK), int64(dm.spec.Experts)
	n += (dm.gu.bytes + dm.down.bytes) * k / e
	for _, w := range []*dweight{dm.shGU, dm.shDown, dm.shGate} {
		if w != nil {
			n += w.bytes
		}
	}
	return n
}

func (dm *dmoe) release() {
	for _, w := range dm.weights() {
		w.release()
	}
	dm.selBias.Release()
	dm.rBias.Release()
	dm.guBias.Release()
	dm.dBias.Release()
}

// expertPipe is the routed-expert matvec for codec c; it also builds the
// prefill variant (expertGemmPipe) so that New reports either's problem.
func (b *Backend) expertPipe(c tensor.Codec) (*gpu.Pipeline, error) {
	src, err := shaders.ExpertMatmul(c)
	if err != nil {
		return nil, err
	}
	p, err := b.dev.Pipeline("moe_matmul/"+c.String(), src, kinds(shaders.KExperts))
	if err != nil {
		return nil, err
	}
	if _, err := b.expertGemmPipe(c); err != nil {
		return nil, err
	}
	return p, nil
}

// expertGemmPipe is the prefill expert kernel: picks grouped by expert,
// Tuning.GemmTB tokens per workgroup.
func (b *Backend) expertGemmPipe(c tensor.Codec) (*gpu.Pipeline, error) {
	tb := b.tune.GemmTB
	src, err := shaders.ExpertGemm(c, tb)
	if err != nil {
		return nil, err
	}
	return b.dev.Pipeline(fmt.Sprintf("moe_gemm/%s/tb%d", c, tb), src, kinds(shaders.KExperts))
}

func (b *Backend) hybridPipe(name string) (*gpu.Pipeline, error) {
	src, err := shaders.Hybrid(name)
	if err != nil {
		return nil, err
	}
	return b.dev.Pipeline(name, src, kinds(name))
}

// moeScratch are a session's MoE activations, shared by every MoE layer.
type moeScratch struct {
	logits, sel, wts, act, y, shy, shg *gpu.Buffer
}

func (s *Session) moeBuffers() (*moeScratch, error) {
	if s.moe != nil {
		return s.moe, nil
	}
	a := s.b.arch
	var E, K, I int
	for _, l := range a.Layers {
		if l.MoE != nil {
			E, K, I = max(E, l.MoE.Experts), max(K, l.MoE.TopK), max(I, l.MoE.ExpertHidden)
		}
	}
	c := s.chunk
	ms := &moeScratch{}
	for _, sp := range []struct {
		dst  **gpu.Buffer
		name string
		n    int
	}{
		{&ms.logits, "moe logits", c * E}, {&ms.sel, "moe picks", c*K + E + E*c}, {&ms.wts, "moe weights", c * K},
		{&ms.act, "moe act", c * K * I}, {&ms.y, "moe out", c * K * a.Hidden}, {&ms.shy, "shared expert out", c * a.Hidden},
		{&ms.shg, "shared expert gate", max(c, 4)},
	} {
		var err error
		if *sp.dst, err = s.buf(sp.name, 4*sp.n); err != nil {
			return nil, err
		}
	}
	s.moe = ms
	return ms, nil
}

// moeFFN is the routed-expert FFN over the normalized input in (cpu:
// Session.moeFFN) with its residual: router, route (top-k picks and
// weights), the experts' gate/up and down, the shared expert, and the
// weighted sum added into x times the residual scale (or, with a post-FFN
// norm, written to tmp, normalized and then added).
func (g *graph) moeFFN(i int, dl *dlayer, in *gpu.Buffer) error {
	s, b, a := g.s, g.b, g.a
	dm := dl.moe
	sp := dm.spec
	H, E, K, I := a.Hidden, sp.Experts, sp.TopK, sp.ExpertHidden
	lbl := func(x string) string { return fmt.Sprintf("L%d %s", i, x) }
	ms, err := s.moeBuffers()
	if err != nil {
		return err
	}
	W := gpu.Whole
	stepB := W(s.step)
	if _, err := g.matmul(lbl("router"), matmul{W: dm.router, X: in, Out: ms.logits, Bias: dm.rBias, OutStride: E}); err != nil {
		return err
	}
	routeP, err := b.hybridPipe(shaders.MoERoute)
	if err != nil {
		return err
	}
	g.add(lbl("moe route"), &op{mv: routeP, rows: rowsOne, x: 1, y: 1}, routeP,
		s.param(shaders.RouteParams{E: u32(E), K: u32(K), Scoring: u32(routeScoring(sp.Scoring)), NormTopK: flag(sp.NormTopK),
			HasBias: flag(dm.selBias != nil), Scale: sp.Routed(), Stride: u32(s.chunk)}),
		stepB, W(ms.logits), g.bias(dm.selBias), W(ms.sel), W(ms.wts))
	act := 0
	switch a.Act {
	case model.ActGELUTanh:
		act = 1
	case model.ActSwiGLUOAI:
		act = 2
	}
	expert := func(label string, w *dweight, rows int, gu bool, x, out *gpu.Buffer, bias *gpu.Buffer) error {
		p, err := b.expertPipe(w.codec)
		if err != nil {
			return err
		}
		mm, err := b.expertGemmPipe(w.codec)
		if err != nil {
			return err
		}
		gx := min(rows, 65535)
		gy := (rows + 65534) / 65535
		// Prefill (mm): x = rows (checkMoE bounds them), y = experts.
		g.add(lbl(label), &op{mv: p, mm: mm, mmTB: s.b.tune.GemmTB, mx: uint32(rows), my: uint32(E), rows: rowsTok, x: uint32(gx), y: uint32(gy), zRows: true,
			wgBytes: w.bytes * int64(K) / int64(E)}, p,
			s.param(shaders.ExpertParams{Rows: u32(rows), Cols: u32(w.cols), SOff: w.soff, GU: flag(gu), K: u32(K), Act: u32(act), E: u32(E),
				Stride: u32(s.chunk), HasBias: flag(bias != nil), Limit: a.SwiGLULimit, Alpha: a.SwiGLUAlpha}),
			stepB, W(w.buf), W(x), W(out), W(ms.sel), g.bias(bias))
		return nil
	}
	if err := expert("experts gate/up", dm.gu, I, true, in, ms.act, dm.guBias); err != nil {
		return err
	}
	if err := expert("experts down", dm.down, H, false, ms.act, ms.y, dm.dBias); err != nil {
		return err
	}
	if dm.shGU != nil {
		S := sp.SharedHidden
		if _, err := g.matmul(lbl("shared gate/up"), matmul{W: dm.shGU, X: in, Out: s.gu, OutStride: 2 * S}); err != nil {
			return err
		}
		actP, err := b.namedPipe(shaders.ActMul)
		if err != nil {
			return err
		}
		g.add(lbl("shared act"), &op{mv: actP, rows: rowsTok, x: uint32((S + 63) / 64), y: 1, perRow: true}, actP,
			s.param(shaders.ActMulParams{F: u32(S), Act: u32(act)}), stepB, W(s.gu), W(s.act))
		if _, err := g.matmul(lbl("shared down"), matmul{W: dm.shDown, X: s.act, Out: ms.shy, OutStride: H}); err != nil {
			return err
		}
		if dm.shGate != nil {
			if _, err := g.matmul(lbl("shared gate"), matmul{W: dm.shGate, X: in, Out: ms.shg, OutStride: 1}); err != nil {
				return err
			}
		}
	}
	sumP, err := b.hybridPipe(shaders.MoECombine)
	if err != nil {
		return err
	}
	rs := a.Scales().Residual
	mode, alpha, out := 1, rs, s.x
	if dl.postFFNNorm != nil {
		mode, alpha, out = 0, 1, s.tmp
	}
	g.add(lbl("moe sum"), &op{mv: sumP, rows: rowsTok, x: uint32((H + 63) / 64), y: 1, perRow: true}, sumP,
		s.param(shaders.MoECombineParams{H: u32(H), K: u32(K), Mode: u32(mode), Alpha: alpha, HasShared: flag(dm.shGU != nil),
			SharedGate: flag(dm.shGU != nil && dm.shGate != nil)}),
		stepB, W(ms.y), W(ms.wts), W(ms.shy), W(ms.shg), W(out))
	if dl.postFFNNorm != nil {
		_, err := g.norm(lbl("post ffn norm"), rmsNorm{W: dl.postFFNNorm, X: s.tmp, Out: s.x, N: H, Add: true, Scale: rs})
		return err
	}
	return nil
}

package webgpu

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// Hybrid token mixers (LFM2 short conv, qwen3_next gated DeltaNet) and the
// attention output gate. A mixer writes its pre-projection output into the
// session's att buffer; the layer's o weight is its out projection, so the
// attention path's o matmul, post-mixer norm and residual serve it. Their
// recurrent state (conv windows, DeltaNet matrices) lives on the device per
// session, a ring of s.slots states (see state.go); the kernels treat it as
// zeros at position 0, so Reset needs no device work.

// dconv is LFM2's gated short convolution.
type dconv struct {
	spec   *model.ShortConv
	in     *dweight    // [3H, H]: B, C, x
	inBias *gpu.Buffer // [3H] or nil
	taps   *gpu.Buffer // [H, K]
	bias   *gpu.Buffer // [H] or nil
}

// ddelta is qwen3_next's gated DeltaNet.
type ddelta struct {
	spec *model.GatedDelta
	qkvz *dweight    // [2*kh*dk + 2*vh*dv, H], grouped per key head
	ba   *dweight    // [2*vh, H], grouped per key head
	taps *gpu.Buffer // [cdim, K]
	hw   *gpu.Buffer // [dt_bias (vh) | -exp(A_log) (vh) | norm w (dv)]
	cdim int
	rw   int
}

// checkMixer refuses the mixers (or their shapes) the kernels do not run.
func checkMixer(i int, l *model.Layer) error {
	switch l.Mixer {
	case model.MixerAttention:
		if l.Attn == nil {
			return fmt.Errorf("webgpu: layer %d: attention mixer without a spec", i)
		}
		return nil
	case model.MixerShortConv:
		if l.Conv == nil || l.Conv.Kernel < 1 || l.Conv.Kernel > shaders.MaxConvKernel {
			return fmt.Errorf("webgpu: %w: layer %d short conv kernel (1..%d)", ErrUnsupported, i, shaders.MaxConvKernel)
		}
		return nil
	case model.MixerGatedDelta:
		d := l.Delta
		switch {
		case d == nil, d.KeyHeads <= 0, d.ValueHeads%d.KeyHeads != 0:
			return fmt.Errorf("webgpu: %w: layer %d gated delta heads", ErrUnsupported, i)
		case d.KeyDim <= 0 || d.KeyDim > shaders.MaxDeltaKey || d.ValueDim <= 0 || d.ValueDim > 128:
			return fmt.Errorf("webgpu: %w: layer %d gated delta head dims %d/%d (at most %d/128)", ErrUnsupported, i, d.KeyDim, d.ValueDim, shaders.MaxDeltaKey)
		case d.ConvKernel < 1 || d.ConvKernel > shaders.MaxConvKernel:
			return fmt.Errorf("webgpu: %w: layer %d gated delta conv kernel %d", ErrUnsupported, i, d.ConvKernel)
		case (d.ValueHeads*d.ValueDim)%4 != 0:
			return fmt.Errorf("webgpu: %w: layer %d gated delta value width %d", ErrUnsupported, i, d.ValueHeads*d.ValueDim)
		}
		return nil
	}
	return fmt.Errorf("webgpu: %w: layer %d mixer %q", ErrUnsupported, i, l.Mixer)
}

// mixerWidth is the width of a hybrid mixer's pre-projection output.
func mixerWidth(l *model.Layer, hidden int) int {
	if l.Delta != nil {
		return l.Delta.ValueHeads * l.Delta.ValueDim
	}
	return hidden
}

// loadMixer loads layer i's hybrid mixer; dl.o becomes its out projection.
func (b *Backend) loadMixer(m *model.Model, i int, dl *dlayer) error {
	a := b.arch
	H := a.Hidden
	l := dl.spec
	name := func(s string) string { return model.LayerTensor(i, s) }
	mat := func(s string, rows, cols int) (*dweight, error) {
		t, err := b.tensor(m, name(s))
		if err != nil {
			return nil, err
		}
		if t.Rows() != rows || t.Cols() != cols {
			return nil, fmt.Errorf("webgpu: %s shape %v, want [%d %d]", t.Name, t.Shape, rows, cols)
		}
		return b.uploadWeight(t.Name, t)
	}
	vec := func(s string, n int) ([]float32, error) {
		t, err := b.tensor(m, name(s))
		if err != nil {
			return nil, err
		}
		return vectorF32(t, n)
	}
	opt := func(s string, n int) (*gpu.Buffer, error) {
		if _, ok := m.Weights.Tensor(name(s)); !ok {
			return nil, nil
		}
		return b.uploadVec(m, name(s), n)
	}
	var err error
	switch l.Mixer {
	case model.MixerShortConv:
		K := l.Conv.Kernel
		c := &dconv{spec: l.Conv}
		if c.in, err = mat(model.ShortConvIn, 3*H, H); err != nil {
			return err
		}
		if dl.o, err = mat(model.ShortConvOut, H, H); err != nil {
			return err
		}
		taps, err := vec(model.ShortConvWeight, H*K)
		if err != nil {
			return err
		}
		if c.taps, err = b.uploadF32(name(model.ShortConvWeight), taps); err != nil {
			return err
		}
		if c.bias, err = opt(model.ShortConvBias, H); err != nil {
			return err
		}
		if c.inBias, err = opt(model.ShortConvInBias, 3*H); err != nil {
			return err
		}
		if dl.oBias, err = opt(model.ShortConvOutB, H); err != nil {
			return err
		}
		dl.conv = c
	case model.MixerGatedDelta:
		d := l.Delta
		kd, vd := d.KeyHeads*d.KeyDim, d.ValueHeads*d.ValueDim
		dd := &ddelta{spec: d, cdim: 2*kd + vd, rw: 2*kd + 2*vd}
		if dd.qkvz, err = mat(model.DeltaQKVZ, dd.rw, H); err != nil {
			return err
		}
		if dd.ba, err = mat(model.DeltaBA, 2*d.ValueHeads, H); err != nil {
			return err
		}
		if dl.o, err = mat(model.DeltaOut, H, vd); err != nil {
			return err
		}
		taps, err := vec(model.DeltaConv, dd.cdim*d.ConvKernel)
		if err != nil {
			return err
		}
		if dd.taps, err = b.uploadF32(name(model.DeltaConv), taps); err != nil {
			return err
		}
		dt, err := vec(model.DeltaDTBias, d.ValueHeads)
		if err != nil {
			return err
		}
		aLog, err := vec(model.DeltaALog, d.ValueHeads)
		if err != nil {
			return err
		}
		nw, err := vec(model.DeltaNorm, d.ValueDim)
		if err != nil {
			return err
		}
		hw := append([]float32(nil), dt...)
		for _, v := range aLog {
			hw = append(hw, -float32(math.Exp(float64(v))))
		}
		hw = append(hw, nw...)
		if dd.hw, err = b.uploadF32(name("ssm_params"), hw); err != nil {
			return err
		}
		dl.delta = dd
	default:
		return fmt.Errorf("webgpu: %w: layer %d mixer %q", ErrUnsupported, i, l.Mixer)
	}
	return nil
}

// splitQGate separates an output-gated q projection, interleaved per head
// as [q_h (hd), gate_h (hd)], into the q rows and the gate rows. Rows are
// encoded independently in every codec, so the split copies row bytes.
func splitQGate(t *tensor.Tensor, heads, hd int) (q, gate *tensor.Tensor, err error) {
	rb, err := t.Codec.RowBytes(t.Cols())
	if err != nil {
		return nil, nil, fmt.Errorf("webgpu: %s: %w", t.Name, err)
	}
	if t.Rows() != 2*heads*hd || len(t.Data) != t.Rows()*rb {
		return nil, nil, fmt.Errorf("webgpu: %s shape %v, want [%d %d]", t.Name, t.Shape, 2*heads*hd, t.Cols())
	}
	qd := make([]byte, 0, heads*hd*rb)
	gd := make([]byte, 0, heads*hd*rb)
	for h := range heads {
		base := 2 * h * hd * rb
		qd = append(qd, t.Data[base:base+hd*rb]...)
		gd = append(gd, t.Data[base+hd*rb:base+2*hd*rb]...)
	}
	shape := []int{heads * hd, t.Cols()}
	// Both halves are rows of one matrix: its side field, if any, is theirs.
	return &tensor.Tensor{Name: t.Name, Codec: t.Codec, Shape: shape, Data: qd, Side: t.Side},
		&tensor.Tensor{Name: t.Name + "[gate]", Codec: t.Codec, Shape: shape, Data: gd, Side: t.Side}, nil
}

func (dl *dlayer) mixerWeights() []*dweight {
	var ws []*dweight
	if dl.conv != nil {
		ws = append(ws, dl.conv.in)
	}
	if dl.delta != nil {
		ws = append(ws, dl.delta.qkvz, dl.delta.ba)
	}
	if dl.qGate != nil {
		ws = append(ws, dl.qGate)
	}
	return ws
}

func (dl *dlayer) releaseMixer() {
	for _, w := range dl.mixerWeights() {
		w.release()
	}
	if c := dl.conv; c != nil {
		c.inBias.Release()
		c.taps.Release()
		c.bias.Release()
	}
	if d := dl.delta; d != nil {
		d.taps.Release()
		d.hw.Release()
	}
}

// hybridPipes compiles the kernels of dl's mixer.
func (b *Backend) hybridPipes(dl *dlayer) error {
	var need []string
	switch {
	case dl.conv != nil:
		need = []string{shaders.ShortConv}
	case dl.delta != nil:
		need = []string{shaders.DeltaConv, shaders.DeltaRule}
	}
	if dl.qGate != nil {
		need = []string{shaders.AttnGate}
	}
	for _, name := range need {
		if _, err := b.hybridPipe(name); err != nil {
			return err
		}
	}
	return nil
}

// mixScratch are a session's hybrid-mixer activations, shared by layers.
type mixScratch struct {
	proj, ba, conv, gate *gpu.Buffer
}

func (s *Session) mixBuffers() (*mixScratch, error) {
	if s.mix != nil {
		return s.mix, nil
	}
	a := s.b.arch
	var proj, ba, conv, gate int
	for i, dl := range s.b.layers {
		if dl == nil {
			continue
		}
		l := &a.Layers[i]
		if dl.conv != nil {
			proj = max(proj, 3*a.Hidden)
		}
		if d := dl.delta; d != nil {
			proj = max(proj, d.rw)
			ba = max(ba, 2*l.Delta.ValueHeads)
			conv = max(conv, d.cdim)
		}
		if dl.qGate != nil {
			gate = max(gate, dl.qw)
		}
	}
	c := s.chunk
	ms := &mixScratch{}
	for _, sp := range []struct {
		dst  **gpu.Buffer
		name string
		n    int
	}{{&ms.proj, "mixer projection", c * proj}, {&ms.ba, "delta ba", c * ba}, {&ms.conv, "delta conv", c * conv}, {&ms.gate, "attention gate", c * gate}} {
		var err error
		if *sp.dst, err = s.buf(sp.name, 4*max(sp.n, 4)); err != nil {
			return nil, err
		}
	}
	s.mix = ms
	return ms, nil
}

// shortConv is LFM2's gated short convolution over the normalized input
// in (cpu: Session.shortConv): the in projection, then the conv with its
// state, writing att.
func (g *graph) shortConv(i int, dl *dlayer, in *gpu.Buffer) error {
	s, b, a := g.s, g.b, g.a
	H := a.Hidden
	lbl := func(x string) string { return fmt.Sprintf("L%d %s", i, x) }
	ms, err := s.mixBuffers()
	if err != nil {
		return err
	}
	W := gpu.Whole
	c := dl.conv
	K := c.spec.Kernel
	if _, err := g.matmul(lbl("conv in"), matmul{W: c.in, X: in, Out: ms.proj, Bias: c.inBias, OutStride: 3 * H}); err != nil {
		return err
	}
	st, err := s.buf(lbl("conv state"), 4*s.slots*max(1, (K-1)*H))
	if err != nil {
		return err
	}
	s.noteState(i, mixerState{conv: st})
	p, err := b.hybridPipe(shaders.ShortConv)
	if err != nil {
		return err
	}
	g.add(lbl("short conv"), &op{mv: p, rows: rowsOne, x: uint32((H + 63) / 64), y: 1}, p,
		s.param(shaders.ShortConvParams{H: u32(H), K: u32(K), HasBias: flag(c.bias != nil), Slots: u32(s.slots)}),
		W(s.step), W(ms.proj), W(c.taps), g.bias(c.bias), W(st), W(s.att))
	return nil
}

// gatedDelta is qwen3_next's gated DeltaNet over the normalized input in
// (cpu: Session.gatedDelta): the qkvz and ba projections, the conv, then
// the delta rule with its state, writing att.
func (g *graph) gatedDelta(i int, dl *dlayer, in *gpu.Buffer) error {
	s, b, a := g.s, g.b, g.a
	lbl := func(x string) string { return fmt.Sprintf("L%d %s", i, x) }
	ms, err := s.mixBuffers()
	if err != nil {
		return err
	}
	W := gpu.Whole
	d := dl.delta
	sp := d.spec
	if _, err := g.matmul(lbl("ssm in"), matmul{W: d.qkvz, X: in, Out: ms.proj, OutStride: d.rw}); err != nil {
		return err
	}
	if _, err := g.matmul(lbl("ssm ba"), matmul{W: d.ba, X: in, Out: ms.ba, OutStride: 2 * sp.ValueHeads}); err != nil {
		return err
	}
	cst, err := s.buf(lbl("ssm conv state"), 4*s.slots*max(1, (sp.ConvKernel-1)*d.cdim))
	if err != nil {
		return err
	}
	rst, err := s.buf(lbl("ssm state"), 4*s.slots*sp.ValueHeads*sp.KeyDim*sp.ValueDim)
	if err != nil {
		return err
	}
	s.noteState(i, mixerState{conv: cst, delta: rst})
	cp, err := b.hybridPipe(shaders.DeltaConv)
	if err != nil {
		return err
	}
	rp, err := b.hybridPipe(shaders.DeltaRule)
	if err != nil {
		return err
	}
	r := sp.ValueHeads / sp.KeyHeads
	g.add(lbl("ssm conv"), &op{mv: cp, rows: rowsOne, x: uint32((d.cdim + 63) / 64), y: 1}, cp,
		s.param(shaders.DeltaConvParams{CDim: u32(d.cdim), K: u32(sp.ConvKernel), KH: u32(sp.KeyHeads), DK: u32(sp.KeyDim), DV: u32(sp.ValueDim),
			R: u32(r), RW: u32(d.rw), Slots: u32(s.slots)}),
		W(s.step), W(ms.proj), W(d.taps), W(cst), W(ms.conv))
	g.add(lbl("ssm delta rule"), &op{mv: rp, rows: rowsOne, x: uint32(sp.ValueHeads), y: 1}, rp,
		s.param(shaders.DeltaRuleParams{KH: u32(sp.KeyHeads), VH: u32(sp.ValueHeads), DK: u32(sp.KeyDim), DV: u32(sp.ValueDim), CDim: u32(d.cdim),
			RW: u32(d.rw), Eps: a.NormEps, Slots: u32(s.slots)}),
		W(s.step), W(ms.conv), W(ms.proj), W(ms.ba), W(d.hw), W(rst), W(s.att))
	return nil
}

// gateProj adds the output-gate projection of an attention layer whose q
// projection carries one (no-op otherwise).
func (g *graph) gateProj(i int, dl *dlayer, in *gpu.Buffer) error {
	if dl.qGate == nil {
		return nil
	}
	ms, err := g.s.mixBuffers()
	if err != nil {
		return err
	}
	_, err = g.matmul(fmt.Sprintf("L%d q gate", i), matmul{W: dl.qGate, X: in, Out: ms.gate, OutStride: dl.qw})
	return err
}

// gateApply multiplies the attention output by sigmoid of the gate.
func (g *graph) gateApply(i int, dl *dlayer) error {
	if dl.qGate == nil {
		return nil
	}
	s := g.s
	p, err := g.b.hybridPipe(shaders.AttnGate)
	if err != nil {
		return err
	}
	g.add(fmt.Sprintf("L%d attention gate", i), &op{mv: p, rows: rowsTok, x: uint32((dl.qw + 63) / 64), y: 1, perRow: true}, p,
		s.param(shaders.AttnGateParams{W: u32(dl.qw)}), gpu.Whole(s.step), gpu.Whole(s.mix.gate), gpu.Whole(s.att))
	return nil
}

package webgpu

import (
	"fmt"
	"math"

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
	in     *dweight // [3H, H]: B, C, x
	inBias *Buffer  // [3H] or nil
	taps   *Buffer  // [H, K]
	bias   *Buffer  // [H] or nil
}

// ddelta is qwen3_next's gated DeltaNet.
type ddelta struct {
	spec *model.GatedDelta
	qkvz *dweight // [2*kh*dk + 2*vh*dv, H], grouped per key head
	ba   *dweight // [2*vh, H], grouped per key head
	taps *Buffer  // [cdim, K]
	hw   *Buffer  // [dt_bias (vh) | -exp(A_log) (vh) | norm w (dv)]
	cdim int
	rw   int
}

var (
	kindsShortConv = []BindKind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}
	kindsDeltaConv = []BindKind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}
	kindsDeltaRule = []BindKind{Uniform, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}
	kindsAttnGate  = []BindKind{Uniform, ReadOnly, ReadOnly, ReadWrite}
)

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
	opt := func(s string, n int) (*Buffer, error) {
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
	return &tensor.Tensor{Name: t.Name, Codec: t.Codec, Shape: shape, Data: qd},
		&tensor.Tensor{Name: t.Name + "[gate]", Codec: t.Codec, Shape: shape, Data: gd}, nil
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
		w.buf.Release()
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
	var need map[string][]BindKind
	switch {
	case dl.conv != nil:
		need = map[string][]BindKind{shaders.ShortConv: kindsShortConv}
	case dl.delta != nil:
		need = map[string][]BindKind{shaders.DeltaConv: kindsDeltaConv, shaders.DeltaRule: kindsDeltaRule}
	}
	if dl.qGate != nil {
		need = map[string][]BindKind{shaders.AttnGate: kindsAttnGate}
	}
	for name, k := range need {
		if _, err := b.hybridPipe(name, k); err != nil {
			return err
		}
	}
	return nil
}

// mixScratch are a session's hybrid-mixer activations, shared by layers.
type mixScratch struct {
	proj, ba, conv, gate *Buffer
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
		dst  **Buffer
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

// buildMixer lays out layer i's hybrid mixer over the normalized input in,
// writing its pre-projection output into s.att.
func (s *Session) buildMixer(i int, dl *dlayer, in *Buffer, add addFunc, matmul matmulFunc) error {
	b := s.b
	a := b.arch
	H := a.Hidden
	lbl := func(x string) string { return fmt.Sprintf("L%d %s", i, x) }
	ms, err := s.mixBuffers()
	if err != nil {
		return err
	}
	W := Whole
	stepB := W(s.step)
	switch {
	case dl.conv != nil:
		c := dl.conv
		K := c.spec.Kernel
		if err := matmul(lbl("conv in"), c.in, in, ms.proj, c.inBias, 0, 1, 0, 0, 3*H, 0, rowsTok); err != nil {
			return err
		}
		st, err := s.buf(lbl("conv state"), 4*s.slots*max(1, (K-1)*H))
		if err != nil {
			return err
		}
		s.noteState(i, mixerState{conv: st})
		p, err := b.hybridPipe(shaders.ShortConv, kindsShortConv)
		if err != nil {
			return err
		}
		bias, hasBias := W(b.zero), false
		if c.bias != nil {
			bias, hasBias = W(c.bias), true
		}
		add(lbl("short conv"), &op{mv: p, rows: rowsOne, x: uint32((H + 63) / 64), y: 1}, p,
			s.hybridParam(H, K, hasBias, s.slots), stepB, W(ms.proj), W(c.taps), bias, W(st), W(s.att))
	case dl.delta != nil:
		d := dl.delta
		sp := d.spec
		if err := matmul(lbl("ssm in"), d.qkvz, in, ms.proj, nil, 0, 1, 0, 0, d.rw, 0, rowsTok); err != nil {
			return err
		}
		if err := matmul(lbl("ssm ba"), d.ba, in, ms.ba, nil, 0, 1, 0, 0, 2*sp.ValueHeads, 0, rowsTok); err != nil {
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
		cp, err := b.hybridPipe(shaders.DeltaConv, kindsDeltaConv)
		if err != nil {
			return err
		}
		rp, err := b.hybridPipe(shaders.DeltaRule, kindsDeltaRule)
		if err != nil {
			return err
		}
		r := sp.ValueHeads / sp.KeyHeads
		add(lbl("ssm conv"), &op{mv: cp, rows: rowsOne, x: uint32((d.cdim + 63) / 64), y: 1}, cp,
			s.hybridParam(d.cdim, sp.ConvKernel, sp.KeyHeads, sp.KeyDim, sp.ValueDim, r, d.rw, s.slots),
			stepB, W(ms.proj), W(d.taps), W(cst), W(ms.conv))
		add(lbl("ssm delta rule"), &op{mv: rp, rows: rowsOne, x: uint32(sp.ValueHeads), y: 1}, rp,
			s.hybridParam(sp.KeyHeads, sp.ValueHeads, sp.KeyDim, sp.ValueDim, d.cdim, d.rw, a.NormEps, s.slots),
			stepB, W(ms.conv), W(ms.proj), W(ms.ba), W(d.hw), W(rst), W(s.att))
	default:
		return fmt.Errorf("webgpu: layer %d: no hybrid mixer", i)
	}
	return nil
}

// gateProj adds the output-gate projection of an attention layer whose q
// projection carries one (no-op otherwise).
func (s *Session) gateProj(i int, dl *dlayer, in *Buffer, matmul matmulFunc) error {
	if dl.qGate == nil {
		return nil
	}
	ms, err := s.mixBuffers()
	if err != nil {
		return err
	}
	return matmul(fmt.Sprintf("L%d q gate", i), dl.qGate, in, ms.gate, nil, 0, 1, 0, 0, dl.qw, 0, rowsTok)
}

// gateApply multiplies the attention output by sigmoid of the gate.
func (s *Session) gateApply(i int, dl *dlayer, add addFunc) error {
	if dl.qGate == nil {
		return nil
	}
	p, err := s.b.hybridPipe(shaders.AttnGate, kindsAttnGate)
	if err != nil {
		return err
	}
	add(fmt.Sprintf("L%d attention gate", i), &op{mv: p, rows: rowsTok, x: uint32((dl.qw + 63) / 64), y: 1, perRow: true}, p,
		s.hybridParam(dl.qw, 0, 0, 0), Whole(s.step), Whole(s.mix.gate), Whole(s.att))
	return nil
}

// hybridParam reserves a uniform slot of 48 bytes (the matmul's, the
// largest) for a hybrid or MoE kernel. wgpu-native checks a dispatch's
// uniform binding against the size an earlier pipeline of the same bind
// group layout declared (a 16-byte block dispatched right after
// attn_combine's 32-byte one failed validation), so these kernels all
// declare and bind the largest size.
func (s *Session) hybridParam(vals ...any) Binding {
	for len(vals) < 12 {
		vals = append(vals, 0)
	}
	return s.param(vals...)
}

package webgpu

import (
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
)

// The session's graph is laid out once, when the session is made: every op
// with its pipelines, uniform slot and bind groups. The builder below
// mirrors the CPU forward pass (cpu/session.go) function for function:
//
//	embed
//	per layer: norm → mixer (attention | shortConv | gatedDelta) → residual
//	           norm → ffn (denseFFN | moeFFN) → residual
//	head (final norm, lm head), then the greedy pick on the device
//
// What differs is the fusion the GPU wants: a one-token step reads a
// pre-norm's input straight into the matvecs that follow it (fuseNorm), the
// residual add happens in the output projection's epilogue, and interleaved
// gate/up rows apply the activation in the matvec. Ops are typed structs
// (matmul, rmsNorm) whose zero fields take the defaults; the kernels'
// uniforms are the shaders package's params structs.

// graph is a session's graph under construction.
type graph struct {
	s    *Session
	b    *Backend
	a    *model.Arch
	pend []pendingOp
	// ropes holds the (cos, sin) tables uploaded so far, one per distinct
	// rotary setup.
	ropes map[string]*gpu.Buffer
	// attn is the attention op of the layer being built (nil elsewhere).
	attn *op
}

type pendingOp struct {
	o       *op
	p       *gpu.Pipeline
	binds   []gpu.Binding
	label   string
	prefill bool // the bind group is o.gm
	second  bool // o's second bind group: o is already in the graph
	aside   bool // dispatched through another op (attention's split-K variants), not listed in the layer
}

// param reserves a uniform slot for one op's parameters.
func (s *Session) param(p shaders.Params) gpu.Binding {
	data := shaders.Pack(p)
	off := uint64(len(s.pData))
	s.pData = append(s.pData, data...)
	for uint64(len(s.pData))%s.slot != 0 {
		s.pData = append(s.pData, 0)
	}
	return gpu.Binding{Off: off, Size: uint64(len(data))} // Buf set once the buffer exists
}

// add appends op o (pipeline p, bindings binds) to the graph.
func (g *graph) add(label string, o *op, p *gpu.Pipeline, binds ...gpu.Binding) *op {
	o.label = label
	g.pend = append(g.pend, pendingOp{o: o, p: p, binds: binds, label: label})
	return o
}

// addAside is add for an op another op dispatches (it is not listed among
// its layer's ops).
func (g *graph) addAside(label string, o *op, p *gpu.Pipeline, binds ...gpu.Binding) *op {
	g.add(label, o, p, binds...)
	g.pend[len(g.pend)-1].aside = true
	return o
}

// build lays out every op of the graph, then creates the parameter buffer
// and the bind groups, once for the session's lifetime.
func (s *Session) build() error {
	b := s.b
	s.slot = uint64(max(64, int(b.dev.Limits().MinUniformBufferOffsetAlignment)))
	g := &graph{s: s, b: b, a: b.arch}
	if err := g.embed(); err != nil {
		return err
	}
	s.layerOps = make([][]*op, len(g.a.Layers))
	for i, dl := range b.layers {
		if dl == nil {
			continue // a host layer
		}
		start := len(g.pend)
		if err := g.layer(i, dl); err != nil {
			return err
		}
		for _, p := range g.pend[start:] {
			if !p.second && !p.aside {
				s.layerOps[i] = append(s.layerOps[i], p.o)
			}
		}
	}
	start := len(g.pend)
	if err := g.head(); err != nil {
		return err
	}
	for _, p := range g.pend[start:] {
		if !p.second {
			s.headOps = append(s.headOps, p.o)
		}
	}
	if err := g.greedy(); err != nil {
		return err
	}
	return g.finish()
}

// finish creates the uniform buffer holding every op's parameters and the
// ops' bind groups.
func (g *graph) finish() error {
	s, b := g.s, g.b
	pbuf, err := b.dev.NewBuffer("params", uint64(len(s.pData)), wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
	if err != nil {
		return err
	}
	s.params = pbuf
	s.bufs = append(s.bufs, pbuf)
	if err := b.dev.Write(pbuf, 0, s.pData); err != nil {
		return err
	}
	for _, p := range g.pend {
		binds := p.binds
		if p.p.Kinds()[0] == gpu.Uniform {
			binds[0].Buf = pbuf
		}
		bg, err := b.dev.BindGroup(p.p, p.label, binds...)
		if err != nil {
			return err
		}
		if p.prefill {
			p.o.gm = bg
		} else {
			p.o.g = bg
		}
		s.groups = append(s.groups, bg)
	}
	return nil
}

// embed gathers the step's token rows into x, times the embedding scale.
func (g *graph) embed() error {
	s, b, a := g.s, g.b, g.a
	ep, err := b.embedPipe(b.emb.codec)
	if err != nil {
		return err
	}
	s.embed = g.add("embed", &op{mv: ep, rows: rowsTok, x: uint32((a.Hidden/4 + 63) / 64), y: 1, perRow: true}, ep,
		s.param(shaders.EmbedParams{Hidden: u32(a.Hidden), SOff: b.emb.soff, Scale: b.embScale}),
		gpu.Whole(s.step), gpu.Whole(s.tokens), gpu.Whole(b.emb.buf), gpu.Whole(s.x))
	return nil
}

// layer is one decoder layer: the token mixer with its residual, then the
// feed-forward block with its residual (cpu: runLayers' loop body).
func (g *graph) layer(i int, dl *dlayer) error {
	s, a := g.s, g.a
	l := dl.spec
	lbl := func(x string) string { return fmt.Sprintf("L%d %s", i, x) }

	// Token mixer.
	in := s.x
	var pre *preNorm
	if l.PreMixerNorm {
		n, err := g.norm(lbl("attn norm"), rmsNorm{W: dl.attnNorm, X: s.x, Out: s.h, N: a.Hidden})
		if err != nil {
			return err
		}
		in = s.h
		if dl.at != nil && dl.qGate == nil {
			pre = &preNorm{op: n, w: dl.attnNorm}
		}
	}
	var err error
	g.attn = nil
	switch {
	case dl.at != nil:
		err = g.attention(i, dl, in, pre)
	case dl.conv != nil:
		err = g.shortConv(i, dl, in)
	case dl.delta != nil:
		err = g.gatedDelta(i, dl, in)
	default:
		err = fmt.Errorf("webgpu: layer %d: no mixer", i)
	}
	if err != nil {
		return err
	}
	o, om, err := g.residual(lbl("o"), dl.o, dl.oBias, s.att, lbl("post attn norm"), dl.postAttnNorm)
	if err != nil {
		return err
	}
	if g.attn != nil && dl.qGate == nil {
		if err := g.combineInto(lbl("o (combine)"), dl, g.attn, o, om); err != nil {
			return err
		}
	}

	// Feed-forward.
	in, pre = s.x, nil
	if l.PreFFNNorm {
		n, err := g.norm(lbl("ffn norm"), rmsNorm{W: dl.ffnNorm, X: s.x, Out: s.h, N: a.Hidden})
		if err != nil {
			return err
		}
		in = s.h
		if dl.moe == nil {
			pre = &preNorm{op: n, w: dl.ffnNorm}
		}
	}
	if dl.moe != nil {
		return g.moeFFN(i, dl, in)
	}
	return g.denseFFN(i, dl, in, pre)
}

// residual adds a branch's output projection w·in (+bias) into x times the
// residual scale; with a post-norm (post non-nil) the projection goes to
// tmp and the norm adds it (cpu: Session.residual).
// It returns the projection's op and matmul.
func (g *graph) residual(label string, w *dweight, bias, in *gpu.Buffer, postLabel string, post *gpu.Buffer) (*op, matmul, error) {
	s, a := g.s, g.a
	rs := a.Scales().Residual
	if post == nil {
		m := matmul{W: w, X: in, Out: s.x, Bias: bias, Add: true, Scale: rs, OutStride: a.Hidden}
		o, err := g.matmul(label, m)
		return o, m, err
	}
	m := matmul{W: w, X: in, Out: s.tmp, Bias: bias, OutStride: a.Hidden}
	o, err := g.matmul(label, m)
	if err != nil {
		return nil, m, err
	}
	_, err = g.norm(postLabel, rmsNorm{W: post, X: s.tmp, Out: s.x, N: a.Hidden, Add: true, Scale: rs})
	return o, m, err
}

// combineInto gives the output projection o (matmul m, just added after
// attention op attn) a one-token variant that merges attn's split-K
// partials itself (shaders.MatvecComb), so a split one-token step has no
// combine dispatch. Where the staged matvec does not fit (codec, width,
// workgroup memory) or Tuning.AttnCombine is "separate", nothing changes.
func (g *graph) combineInto(label string, dl *dlayer, attn, o *op, m matmul) error {
	s, b := g.s, g.b
	at, w := dl.at, m.W
	if b.tune.AttnCombine != "" || attn.splitDec == nil || attn.combineDec == nil {
		return nil
	}
	cb := shaders.Comb{Heads: at.Heads, HD: at.HeadDim, Window: at.Window, SplitLen: s.decSplitLen, MaxSplits: s.decSplits}
	sh := b.tune.matvecShape(w.rows)
	if !shaders.MatvecCodec(w.codec) || w.cols != at.Heads*at.HeadDim || w.cols%shaders.ChunkOf(w.codec) != 0 ||
		shaders.MatvecCombSharedBytes(sh, w.cols, cb)+shaders.LUTBytes(w.codec) > int(b.dev.Limits().MaxComputeWorkgroupStorageSize) {
		return nil
	}
	p, err := b.dev.PipelineOf(fmt.Sprintf("matvec-comb/%s/r%ds%dg%d/%d/%+v", w.codec, sh.Rows, sh.Sets, sh.Groups, w.cols, cb),
		func() (string, error) { return shaders.MatvecComb(w.codec, sh, w.cols, cb) }, kinds(shaders.KMatmulComb))
	if err != nil {
		return nil // the separate combine serves
	}
	gx, gy := matmulGrid(w.rows, sh.RowsPerWorkgroup())
	o.comb = g.addAside(label, &op{mv: p, rows: rowsTok, x: gx, y: gy, zRows: true}, p, s.param(m.params(false, 0)),
		gpu.Whole(s.step), gpu.Whole(w.buf), gpu.Whole(m.X), gpu.Whole(m.Out), g.bias(m.Bias), gpu.Whole(s.part))
	attn.combInto = o
	return nil
}

// attention is softmax attention over the KV cache (cpu:
// Session.attention): the q/k/v projections into qkv (with the pre-norm
// fused for one-token steps), q/k norms, then qkv_prep (RoPE, per-head q/k
// norm, the KV write) and the attention kernel with its split-K and tiled
// variants, writing att.
func (g *graph) attention(i int, dl *dlayer, in *gpu.Buffer, pre *preNorm) error {
	s, b, a := g.s, g.b, g.a
	at := dl.at
	lbl := func(x string) string { return fmt.Sprintf("L%d %s", i, x) }
	qkvw := dl.qw + 2*dl.kvw
	off := 0
	for j, w := range dl.qkv {
		bb := dl.qkvBias
		if dl.biasParts != nil {
			bb = dl.biasParts[j]
		}
		m := matmul{W: w, X: in, Out: s.qkv, Bias: bb, OutStride: qkvw, OutOff: off}
		if _, err := g.matmul(lbl("qkv"), m); err != nil {
			return err
		}
		if pre != nil {
			if err := g.fuseNorm(pre, m); err != nil {
				return err
			}
		}
		off += w.rows
	}
	if err := g.gateProj(i, dl, in); err != nil {
		return err
	}
	qkNormPerHead := false
	switch at.QKNorm {
	case model.QKNormFull:
		if _, err := g.norm(lbl("q norm"), rmsNorm{W: dl.qNorm, X: s.qkv, Out: s.qkv, N: dl.qw, InStride: qkvw, OutStride: qkvw}); err != nil {
			return err
		}
		if _, err := g.norm(lbl("k norm"), rmsNorm{W: dl.kNorm, X: s.qkv, Out: s.qkv, N: dl.kvw, InStride: qkvw, InOff: dl.qw, OutStride: qkvw, OutOff: dl.qw}); err != nil {
			return err
		}
	case model.QKNormPerHead:
		qkNormPerHead = true
	}
	cs, err := g.ropeTable(i, dl)
	if err != nil {
		return err
	}
	style := 0
	if at.Rope.Style == model.RopeInterleaved {
		style = 1
	}
	qkn := b.zero
	if qkNormPerHead {
		qkn = dl.qkn
	}
	prepP, err := b.kvPipe(shaders.QKVPrep)
	if err != nil {
		return err
	}
	attnP, err := b.kvPipe(shaders.Attention)
	if err != nil {
		return err
	}
	combP, err := b.namedPipe(shaders.Combine)
	if err != nil {
		return err
	}
	W := gpu.Whole
	stepB := W(s.step)
	prep := g.add(lbl("qkv prep"), &op{mv: prepP, rows: rowsTok, x: uint32(at.Heads + 2*at.KVHeads), y: 1, perRow: true}, prepP,
		s.param(shaders.PrepParams{Heads: u32(at.Heads), KVHeads: u32(at.KVHeads), HD: u32(at.HeadDim), Rot: u32(at.Rope.Dims), Style: u32(style),
			QKNorm: flag(qkNormPerHead), Eps: a.NormEps, PlusOne: flag(a.Norm == model.NormRMSPlusOne), KNOff: u32(dl.knOff), KVLen: u32(s.kvLen[i])}),
		stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(cs), W(qkn))
	// attnParams is the attention kernel's uniform over parts of splitLen
	// positions, at most splits of them (0, 1: one pass).
	attnParams := func(splitLen, splits int) shaders.AttnParams {
		return shaders.AttnParams{Heads: u32(at.Heads), KVHeads: u32(at.KVHeads), HD: u32(at.HeadDim), Window: u32(at.Window), Scale: at.Scale,
			Softcap: at.Softcap, QStride: u32(qkvw), SplitLen: u32(splitLen), MaxSplits: u32(splits), KVLen: u32(s.kvLen[i]),
			HasSink: flag(dl.sinks != nil), SinkOff: u32(s.kvRows(i) * dl.kvw / 4)}
	}
	attn := g.add(lbl("attention"), &op{mv: attnP, rows: rowsTok, x: uint32(at.Heads), y: 1, perRow: true, window: at.Window}, attnP,
		s.param(attnParams(0, 1)), stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(s.att), W(b.zero))
	// The split-K variant and its combine for parts of splitLen
	// positions, at most splits of them.
	splitK := func(splitLen, splits int) (split, combine *op) {
		split = g.addAside(lbl("attention split"), &op{mv: attnP, x: uint32(at.Heads)}, attnP,
			s.param(attnParams(splitLen, splits)), stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(s.att), W(s.part))
		combine = g.addAside(lbl("attention combine"), &op{mv: combP, rows: rowsTok, x: uint32(at.Heads), y: 1, perRow: true}, combP,
			s.param(shaders.CombineParams{Heads: u32(at.Heads), HD: u32(at.HeadDim), Window: u32(at.Window), SplitLen: u32(splitLen), MaxSplits: u32(splits)}),
			stepB, W(s.part), W(s.att))
		return split, combine
	}
	if s.maxSplits > 1 {
		attn.split, attn.combine = splitK(s.splitLen, s.maxSplits)
	}
	g.attn = attn
	attn.tiled = b.attnPrefillPipe(at.HeadDim)
	if s.decSplits > 1 {
		attn.splitDec, attn.combineDec = splitK(s.decSplitLen, s.decSplits)
	}
	if b.tune.AttnPrep == "fused" {
		// One-token steps: the prep fused into attention (and its split
		// variant), one dispatch less per layer.
		fusedP, err := b.kvPipe(shaders.AttentionPrep)
		if err != nil {
			return err
		}
		fused := func(splitLen, splits int) shaders.AttnPrepParams {
			ap := attnParams(splitLen, splits)
			return shaders.AttnPrepParams{Heads: ap.Heads, KVHeads: ap.KVHeads, HD: ap.HD, Window: ap.Window, Scale: ap.Scale, Softcap: ap.Softcap,
				QStride: ap.QStride, SplitLen: ap.SplitLen, MaxSplits: ap.MaxSplits, KVLen: ap.KVLen, HasSink: ap.HasSink, SinkOff: ap.SinkOff,
				Rot: u32(at.Rope.Dims), Style: u32(style), QKNorm: flag(qkNormPerHead), Eps: a.NormEps, PlusOne: flag(a.Norm == model.NormRMSPlusOne), KNOff: u32(dl.knOff)}
		}
		// part is bound (never written) in the single pass so that no
		// writable binding aliases the read-only zero buffer.
		attn.dec = g.addAside(lbl("attention"), &op{mv: fusedP, rows: rowsTok, x: uint32(at.Heads), y: 1, perRow: true, window: at.Window}, fusedP,
			s.param(fused(0, 1)), stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(s.att), W(s.part), W(cs), W(qkn))
		if attn.splitDec != nil {
			attn.splitDecPrep = g.addAside(lbl("attention split"), &op{mv: fusedP, x: uint32(at.Heads)}, fusedP,
				s.param(fused(s.decSplitLen, s.decSplits)), stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(s.att), W(s.part), W(cs), W(qkn))
		}
		prep.fusedAtOne = true
	}
	return g.gateApply(i, dl)
}

// ropeTable is the (cos, sin) table of layer i's rotary embedding
// (model.RopeTable.CosSinRows), one buffer per distinct table; the zero
// buffer for a NoPE layer.
func (g *graph) ropeTable(i int, dl *dlayer) (*gpu.Buffer, error) {
	s, b := g.s, g.b
	if dl.rope == nil || dl.rope.Dims == 0 {
		return b.zero, nil
	}
	if g.ropes == nil {
		g.ropes = map[string]*gpu.Buffer{}
	}
	key := fmt.Sprint(dl.rope.InvFreq, dl.rope.MScale)
	if cs := g.ropes[key]; cs != nil {
		return cs, nil
	}
	cs, err := s.buf(fmt.Sprintf("L%d rope", i), 4*dl.rope.Dims*s.maxLen)
	if err != nil {
		return nil, err
	}
	if err := b.dev.Write(cs, 0, gpu.F32Bytes(dl.rope.CosSinRows(s.maxLen))); err != nil {
		return nil, err
	}
	g.ropes[key] = cs
	return cs, nil
}

// denseFFN is down(act(gate(h)) * up(h)) added into x (cpu:
// Session.denseFFN and residual). Interleaved gate/up rows let one-token
// steps apply the activation in the matvec (straight into act); longer
// steps write gu and run act_mul over it.
func (g *graph) denseFFN(i int, dl *dlayer, in *gpu.Buffer, pre *preNorm) error {
	s, b, a := g.s, g.b, g.a
	lbl := func(x string) string { return fmt.Sprintf("L%d %s", i, x) }
	act := 0
	if a.Act == model.ActGELUTanh {
		act = 1
	}
	fused := dl.guInterleaved && b.matvecPairsRows(dl.gu[0])
	off := 0
	for _, w := range dl.gu {
		m := matmul{W: w, X: in, Out: s.gu, OutStride: 2 * dl.f, OutOff: off}
		mm, err := g.matmul(lbl("gate/up"), m)
		if err != nil {
			return err
		}
		// The one-token variant: gate and up through the activation into
		// act when fused.
		one := matmul{W: w, X: in, Out: s.act, GateUp: true, Act: act, OutStride: dl.f}
		switch {
		case pre != nil && fused:
			err = g.fuseNorm(pre, one)
		case pre != nil:
			err = g.fuseNorm(pre, m)
		case fused:
			err = g.oneToken(lbl("gate/up act"), mm.mv, one, nil)
		}
		if err != nil {
			return err
		}
		off += w.rows
	}
	actP, err := b.namedPipe(shaders.ActMul)
	if err != nil {
		return err
	}
	g.add(lbl("act"), &op{mv: actP, rows: rowsTok, x: uint32((dl.f + 63) / 64), y: 1, perRow: true, prefillOnly: fused}, actP,
		s.param(shaders.ActMulParams{F: u32(dl.f), Act: u32(act), Interleaved: flag(dl.guInterleaved)}), gpu.Whole(s.step), gpu.Whole(s.gu), gpu.Whole(s.act))
	_, _, err = g.residual(lbl("down"), dl.down, nil, s.act, lbl("post ffn norm"), dl.postFFNNorm)
	return err
}

// head is the final norm of the head rows and the vocabulary projection
// (cpu: the end of Forward).
func (g *graph) head() error {
	s, b, a := g.s, g.b, g.a
	if _, err := g.norm("final norm", rmsNorm{W: b.finalNorm, X: s.x, Out: s.h, N: a.Hidden, Head: true}); err != nil {
		return err
	}
	_, err := g.matmul("lm head", matmul{W: b.head, X: s.h, Out: s.logits, Scale: a.Scales().Logit, Softcap: a.FinalSoftcap, Head: true, OutStride: a.Vocab})
	return err
}

// greedy is the pick on the device: argmax_part's workgroups each reduce a
// span of the row, argmax the spans' picks; advance moves the step on.
func (g *graph) greedy() error {
	s, b, a := g.s, g.b, g.a
	apP, err := b.namedPipe(shaders.ArgmaxPart)
	if err != nil {
		return err
	}
	amP, err := b.namedPipe(shaders.Argmax)
	if err != nil {
		return err
	}
	W := gpu.Whole
	per, parts := argmaxSpans(a.Vocab)
	s.argmaxPart = g.add("argmax part", &op{mv: apP, rows: rowsOne, x: uint32(parts), y: 1}, apP,
		s.param(shaders.ArgmaxPartParams{N: u32(a.Vocab), Per: u32(per)}), W(s.step), W(s.logits), W(s.picks))
	s.argmax = g.add("argmax", &op{mv: amP, rows: rowsOne, x: 1, y: 1}, amP,
		s.param(shaders.ArgmaxParams{N: u32(parts)}), W(s.step), W(s.picks), W(s.tokens), W(s.ids))
	advP, err := b.namedPipe(shaders.Advance)
	if err != nil {
		return err
	}
	s.advance = g.add("advance", &op{mv: advP, rows: rowsOne, x: 1, y: 1}, advP, W(s.step))
	return nil
}

// matmul is one projection: out[t·OutStride+OutOff+o] = (or += with Add)
// Scale·(W·x + Bias). Zero fields take the defaults.
type matmul struct {
	W         *dweight
	X, Out    *gpu.Buffer
	Bias      *gpu.Buffer // nil: none
	Add       bool        // accumulate into Out (a residual add)
	Scale     float32     // 0 means 1
	Softcap   float32     // tanh softcap of the result; 0: none
	Head      bool        // the head rows only (the last token's, or all with all=true)
	OutStride int         // 0 means W's rows
	OutOff    int
	// GateUp: W's rows are gate and up interleaved; the kernel writes
	// act(gate)·up (Act 0 SiLU, 1 GELU-tanh) to Out (one-token variants).
	GateUp bool
	Act    int
}

func (m matmul) params(norm bool, eps float32) shaders.MatmulParams {
	mode, sel := 0, 0
	switch {
	case m.GateUp:
		mode = 2
	case m.Add:
		mode = 1
	}
	if m.Head {
		sel = 2
	}
	scale := m.Scale
	if scale == 0 {
		scale = 1
	}
	stride := m.OutStride
	if stride == 0 {
		stride = m.W.rows
	}
	p := shaders.MatmulParams{Rows: u32(m.W.rows), Cols: u32(m.W.cols), SOff: m.W.soff, Mode: u32(mode), Alpha: scale, Softcap: m.Softcap,
		Sel: u32(sel), HasBias: flag(m.Bias != nil), OutStride: u32(stride), OutOff: u32(m.OutOff), Act: u32(m.Act)}
	if norm {
		p.Eps = eps
	}
	return p
}

// bias is the binding of an optional bias (the zero buffer when none).
func (g *graph) bias(b *gpu.Buffer) gpu.Binding {
	if b == nil {
		return gpu.Whole(g.b.zero)
	}
	return gpu.Whole(b)
}

// matmul adds projection m: the decode matvec, the token-blocked matmul
// and, from gemmMinTokens on, the tiled GEMM.
func (g *graph) matmul(label string, m matmul) (*op, error) {
	s, b := g.s, g.b
	w := m.W
	if a := w.stages[0]; a != nil {
		// A weight run as two products (blr): the first into the
		// session's scratch, the second from it with m's epilogue.
		if m.GateUp || m.Head {
			return nil, fmt.Errorf("webgpu: %w: %s: a two-product weight in a fused gate/up or the head", ErrUnsupported, w.name)
		}
		if _, err := g.matmul(label+" (stage 1)", matmul{W: a, X: m.X, Out: s.blr}); err != nil {
			return nil, err
		}
		m.W, m.X = w.stages[1], s.blr
		return g.matmul(label+" (stage 2)", m)
	}
	mv, rpw, err := b.matvecPipe(w.codec, w.rows, w.cols, false)
	if err != nil {
		return nil, err
	}
	mm, err := b.matmulPipe(w.codec, b.tune.GemmTB, b.tune.GemmRows)
	if err != nil {
		return nil, err
	}
	rows := rowsTok
	if m.Head {
		rows = rowsHead
	}
	gx, gy := matmulGrid(w.rows, rpw)
	mx, my := matmulGrid(w.rows, b.tune.GemmRows)
	o := &op{mv: mv, mm: mm, mmTB: b.tune.GemmTB, rows: rows, x: gx, y: gy, mx: mx, my: my, zRows: true, wgBytes: w.bytes, gemmRows: w.rows, gemmCodec: w.codec,
		small: &smallMM{codec: w.codec, rows: w.rows}}
	return g.add(label, o, mv, s.param(m.params(false, 0)),
		gpu.Whole(s.step), gpu.Whole(w.buf), gpu.Whole(m.X), gpu.Whole(m.Out), g.bias(m.Bias)), nil
}

// oneToken gives the matmul op just added a one-token variant m: its own
// pipeline p (o.mv) and bind group; the op's first bind group then serves
// the prefill pipelines only. With nw, the variant normalizes x by the
// norm weights nw itself (shaders.MatmulRowsNorm).
func (g *graph) oneToken(label string, p *gpu.Pipeline, m matmul, nw *gpu.Buffer) error {
	s, a := g.s, g.a
	last := &g.pend[len(g.pend)-1]
	last.prefill = true
	o := last.o
	o.mv = p
	binds := []gpu.Binding{gpu.Whole(s.step), gpu.Whole(m.W.buf), gpu.Whole(m.X), gpu.Whole(m.Out), g.bias(m.Bias)}
	if nw != nil {
		binds = append(binds, gpu.Whole(nw))
		if a.Norm == model.NormRMSPlusOne {
			m.Act |= 2
		}
	}
	// Small steps bind the one-token variant too (small.go).
	o.small.norm = nw != nil
	g.pend = append(g.pend, pendingOp{o: o, p: p, label: label, second: true,
		binds: append([]gpu.Binding{s.param(m.params(nw != nil, a.NormEps))}, binds...)})
	return nil
}

// preNorm is a pre-norm just added whose one-token work the matvecs that
// read its output take over (fuseNorm).
type preNorm struct {
	op   *op
	w    *gpu.Buffer // its weights
	keep bool        // a reader cannot fuse it: it runs at one-token steps too
}

// fuseNorm gives the matmul just added (reading pre's output) a one-token
// variant m that reads pre's input (x) raw and applies the norm itself;
// pre is then left out of one-token steps.
func (g *graph) fuseNorm(pre *preNorm, m matmul) error {
	if m.W.stages[0] != nil {
		// A two-product weight reads the norm's output in its first
		// stage: the norm runs at every step (the fused readers still
		// normalize for themselves).
		pre.keep = true
		pre.op.prefillOnly = false
		return nil
	}
	np, _, err := g.b.matvecPipe(m.W.codec, m.W.rows, m.W.cols, true)
	if err != nil {
		return err
	}
	m.X = g.s.x
	if err := g.oneToken(g.pend[len(g.pend)-1].label+" (norm)", np, m, pre.w); err != nil {
		return err
	}
	pre.op.prefillOnly = !pre.keep
	return nil
}

// rmsNorm normalizes N-wide rows of X into Out (in place when Out is X):
// Out = (or += with Add) Scale·norm(x)·w. Zero fields take the defaults.
type rmsNorm struct {
	W      *gpu.Buffer
	X, Out *gpu.Buffer
	N      int
	Add    bool
	Scale  float32 // 0 means 1
	Head   bool    // the head rows only (the last token's, or all with all=true)
	// Row strides and offsets in X and Out; a stride of 0 means N.
	InStride, InOff, OutStride, OutOff int
}

// norm adds RMSNorm n.
func (g *graph) norm(label string, n rmsNorm) (*op, error) {
	s, b, a := g.s, g.b, g.a
	inPlace := n.X == n.Out
	p, err := b.normPipe(inPlace)
	if err != nil {
		return nil, err
	}
	rows, sel, mode, scale := rowsTok, 0, 0, n.Scale
	if n.Head {
		rows, sel = rowsHead, 1
	}
	if n.Add {
		mode = 1
	}
	if scale == 0 {
		scale = 1
	}
	inStride, outStride := n.InStride, n.OutStride
	if inStride == 0 {
		inStride = n.N
	}
	if outStride == 0 {
		outStride = n.N
	}
	o := &op{mv: p, rows: rows, x: 1, y: 1, perRow: true}
	pb := s.param(shaders.NormParams{N: u32(n.N), Eps: a.NormEps, PlusOne: flag(a.Norm == model.NormRMSPlusOne), Mode: u32(mode), Alpha: scale,
		Sel: u32(sel), InStride: u32(inStride), InOff: u32(n.InOff), OutStride: u32(outStride), OutOff: u32(n.OutOff)})
	W := gpu.Whole
	if inPlace {
		return g.add(label, o, p, pb, W(s.step), W(n.W), W(n.X)), nil
	}
	return g.add(label, o, p, pb, W(s.step), W(n.W), W(n.X), W(n.Out)), nil
}

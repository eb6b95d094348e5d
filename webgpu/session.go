package webgpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// Which row count sizes a dispatch.
type rowsOf uint8

const (
	rowsTok  rowsOf = iota // the step's tokens
	rowsHead               // the head rows (last token, or all with all=true)
	rowsOne                // a single workgroup
)

// op is one prebuilt kernel launch: pipelines, bind group and grid rule.
type op struct {
	mv, mm  *Pipeline // mm (token-blocked) is used when more than one row
	g       *wgpu.BindGroup
	rows    rowsOf
	x, y    uint32 // workgroups per row (x, y)
	mx, my  uint32 // x, y for mm when nonzero (a different row block)
	perRow  bool   // grid z (or y) scales with rows
	zRows   bool   // rows go to z (matmul) instead of y
	wgBytes int64

	// Attention only: the split-K variant and its combine, used when the
	// span to attend over needs at least two splits; splitDec and
	// combineDec are the one-token (decode) variant, which splits short
	// spans too since one workgroup per head would leave the GPU idle.
	split, combine       *op
	splitDec, combineDec *op
	// tiled is the attention for steps of tiledMinTokens or more
	// (shaders.AttnPrefill; o's bind group and uniform), nil where the
	// head dimension does not suit it.
	tiled *Pipeline

	gm          *wgpu.BindGroup // the prefill pipelines' bind group, when it differs from g
	gemm        gemmKernel      // matmuls: the tiled GEMM for steps of gemmMinTokens or more (see prepareGemm)
	gemmRows    int
	gemmCodec   tensor.Codec
	prefillOnly bool // left out of one-token steps (done by a fused kernel there)
	window      int
	label       string
}

func (o *op) dispatch(ntok, headRows int) Dispatch {
	n := ntok
	switch o.rows {
	case rowsHead:
		n = headRows
	case rowsOne:
		n = 1
	}
	p := o.mv
	tb := 1
	if n > 1 && o.mm != nil {
		p, tb = o.mm, gemmTB
	}
	d := Dispatch{P: p, G: o.g, X: o.x, Y: o.y, Z: 1, Label: o.label}
	if p == o.mm && o.gm != nil {
		d.G = o.gm
	}
	if p == o.mm && o.mx != 0 {
		d.X, d.Y = o.mx, o.my
	}
	if p == o.mm && o.gemm.p != nil && n >= gemmMinTokens {
		d.P, tb = o.gemm.p, o.gemm.tileTokens
		d.X, d.Y, _ = o.gemm.grid(o.gemmRows, n)
	}
	if o.zRows {
		d.Z = uint32((n + tb - 1) / tb)
	} else if o.perRow {
		d.Y = uint32(n)
	}
	return d
}

// Session is one sequence on the device: KV cache, activations, prebuilt
// bind groups. Not safe for concurrent use.
type Session struct {
	b      *Backend
	maxLen int
	chunk  int
	// headChunk bounds the rows of one step's logits (Forward with all).
	headChunk int
	pos       int
	broken    error

	bufs   []*Buffer
	groups []*wgpu.BindGroup
	resid  int64
	params *Buffer
	pOff   uint64
	pData  []byte
	slot   uint64

	splitLen, maxSplits          int
	decSplitLen, decSplits       int // the same for one-token steps
	part                         *Buffer
	step, tokens, ids            *Buffer
	picks                        *Buffer // argmax_part's per-span picks
	x, h, qkv, att, tmp, gu, act *Buffer
	logits, stLogits, stX        *Buffer
	stIDs                        []*Buffer      // one per greedy batch in flight
	inflight                     []*GreedyBatch // submitted, not collected, oldest first
	nextSlot                     int
	greedyTail                   bool // tokens[0] on the device holds the last greedy pick
	gemmReady                    bool // prepareGemm ran
	kc, vc                       []*Buffer
	kvLen                        []int // per layer: rows of a sliding-window layer's KV ring; 0 = maxLen rows, one per position
	embed                        *op
	layerOps                     [][]*op // per layer; nil on host layers
	headOps                      []*op
	argmaxPart, argmax, advance  *op
	host                         HostLayers
	maxGreedy                    int
	moe                          *moeScratch        // nil without MoE layers
	mix                          *mixScratch        // nil without hybrid mixers or output gates
	states                       map[int]mixerState // per hybrid layer; see state.go
	slots                        int                // recurrent states kept per hybrid layer (rewind depth + 1)
	lo                           int                // the lowest length whose recurrent state is still kept
}

// splitLenOverride, when set (tests), replaces the split-K span so short
// test sequences take the split path.
var splitLenOverride int

// Split-K geometry of one-token attention: parts of at least decSplitLen
// positions (one tile), at most maxDecSplits of them.
const (
	decSplitLen  = 64
	maxDecSplits = 32
)

// moeChunk bounds the step length of models with routed experts.
const moeChunk = 64

// headChunk is the most positions whose logits one step returns: the
// logits buffer holds that many vocabulary rows.
const headChunk = 32

// maxGreedySteps bounds ForwardGreedy's k (the ids buffer).
const maxGreedySteps = 256

// NewSession allocates a sequence of at most maxLen positions.
func (b *Backend) NewSession(maxLen int) (backend.Session, error) {
	return b.newSession(maxLen)
}

func (b *Backend) newSession(maxLen int) (*Session, error) {
	if b.closed.Load() {
		return nil, errors.New("webgpu: backend closed")
	}
	if maxLen <= 0 {
		return nil, fmt.Errorf("webgpu: session length %d", maxLen)
	}
	s := &Session{b: b, maxLen: maxLen, chunk: min(b.opts.Chunk, maxLen), maxGreedy: maxGreedySteps}
	s.slots = b.opts.RewindDepth + 1
	if b.opts.RewindDepth <= 0 {
		s.slots = backend.DefaultRewindDepth + 1
	}
	for _, dl := range b.layers {
		if dl != nil && dl.moe != nil {
			// Routed-expert scratch grows with chunk x top-k x the expert
			// width: keep it within a browser's 128 MiB bindings.
			s.chunk = min(s.chunk, moeChunk)
		}
	}
	// Every chunk-sized activation buffer must fit one storage binding
	// (128 MiB in browsers by default): the widest is gate/up's.
	limit := uint64(maxBinding)
	if l := b.dev.Limits().MaxStorageBufferBindingSize; l > 0 {
		limit = min(limit, l)
	}
	widest := max(b.arch.Hidden, b.maxQKV, b.maxAtt, 2*b.maxFFN)
	s.chunk = max(1, min(s.chunk, int(limit/uint64(4*widest))))
	s.headChunk = min(s.chunk, headChunk)
	// Split-K attention: at most 64 splits of at least 256 positions.
	s.splitLen = max(256, (maxLen+63)/64)
	s.splitLen = (s.splitLen + 63) &^ 63
	if splitLenOverride > 0 {
		s.splitLen = splitLenOverride
	}
	s.maxSplits = (maxLen + s.splitLen - 1) / s.splitLen
	// A long step has chunk x heads workgroups already; fewer, longer
	// splits keep its partials buffer at the size a 32-token chunk with 64
	// splits needs (attention.wgsl widens the splits to cover the span).
	s.maxSplits = max(1, min(s.maxSplits, 2048/s.chunk))
	// One-token steps split from decSplitLen positions on, into at most
	// decSplits parts (attention.wgsl's splitSpan widens the parts).
	s.decSplitLen = decSplitLen
	if splitLenOverride > 0 {
		s.decSplitLen = splitLenOverride
	}
	s.decSplits = min(maxDecSplits, (maxLen+s.decSplitLen-1)/s.decSplitLen)
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := s.alloc(); err != nil {
		return nil, err
	}
	if err := s.build(); err != nil {
		return nil, err
	}
	for i, dl := range b.layers {
		if dl == nil && s.host == nil {
			h, err := b.host(maxLen)
			if err != nil {
				return nil, fmt.Errorf("webgpu: host layers (layer %d): %w", i, err)
			}
			s.host = h
		}
	}
	ok = true
	return s, nil
}

func (s *Session) buf(label string, size int) (*Buffer, error) {
	buf, err := s.b.dev.NewStorage(label, uint64(size))
	if err != nil {
		return nil, err
	}
	s.bufs = append(s.bufs, buf)
	s.resid += int64(buf.Size())
	s.b.addResident(int64(buf.Size()))
	return buf, nil
}

// argmaxSpans splits a row of n logits for argmax_part: spans of per
// elements (a multiple of the 1024 one workgroup reads in one round of
// loads), at most 256 of them (the final argmax's one pass).
func argmaxSpans(n int) (per, parts int) {
	per = max(1024, (n+256*1024-1)/(256*1024)*1024)
	return per, (n + per - 1) / per
}

func (s *Session) alloc() error {
	a := s.b.arch
	c := s.chunk
	_, picks := argmaxSpans(a.Vocab)
	type spec struct {
		dst  **Buffer
		name string
		n    int
	}
	specs := []spec{
		{&s.step, "step", 8},
		{&s.tokens, "tokens", c},
		{&s.ids, "ids", s.maxGreedy},
		{&s.picks, "argmax picks", 2 * picks * s.headChunk},
		{&s.x, "x", c * a.Hidden},
		{&s.h, "h", c * a.Hidden},
		{&s.tmp, "tmp", c * a.Hidden},
		{&s.qkv, "qkv", c * s.b.maxQKV},
		{&s.att, "att", c * s.b.maxAtt},
		{&s.gu, "gu", c * 2 * s.b.maxFFN},
		{&s.act, "act", c * s.b.maxFFN},
		{&s.logits, "logits", s.headChunk * a.Vocab},
		{&s.part, "attention partials", max(c*s.maxSplits, s.decSplits) * s.b.maxHeads * (s.b.maxHD + 2)},
	}
	for _, sp := range specs {
		var err error
		if *sp.dst, err = s.buf(sp.name, 4*sp.n); err != nil {
			return err
		}
	}
	var err error
	for _, st := range []struct {
		dst **Buffer
		n   int
	}{{&s.stLogits, s.headChunk * a.Vocab}, {&s.stX, c * a.Hidden}} {
		if *st.dst, err = s.b.dev.NewStaging("staging", uint64(4*st.n)); err != nil {
			return err
		}
		s.bufs = append(s.bufs, *st.dst)
	}
	for range 2 {
		st, err := s.b.dev.NewStaging("greedy ids", uint64(4*s.maxGreedy))
		if err != nil {
			return err
		}
		s.bufs = append(s.bufs, st)
		s.stIDs = append(s.stIDs, st)
	}
	s.kc = make([]*Buffer, len(a.Layers))
	s.vc = make([]*Buffer, len(a.Layers))
	s.kvLen = make([]int, len(a.Layers))
	for i, dl := range s.b.layers {
		if dl == nil {
			continue
		}
		rows := s.maxLen
		if dl.at != nil && !s.b.opts.FullKV {
			s.kvLen[i] = ringLen(dl.at.Window, s.chunk, s.slots-1, s.maxLen)
			if s.kvLen[i] > 0 {
				rows = s.kvLen[i]
			}
		}
		// Attention sinks (gpt-oss) live after the last row's keys, as
		// float32 bits whatever the cache's codec, where the attention
		// kernels find them (sink_off, sink_load).
		sinkPad := (len(dl.sinks) + 3) / 4 * 4
		if s.kc[i], err = s.buf(fmt.Sprintf("k cache %d", i), rows*dl.kvw*s.b.kvElem()+sinkPad*4); err != nil {
			return err
		}
		if dl.sinks != nil {
			pad := make([]float32, sinkPad)
			copy(pad, dl.sinks)
			if err := s.b.dev.Write(s.kc[i], uint64(rows*dl.kvw*s.b.kvElem()), F32Bytes(pad)); err != nil {
				return err
			}
		}
		if s.vc[i], err = s.buf(fmt.Sprintf("v cache %d", i), rows*dl.kvw*s.b.kvElem()); err != nil {
			return err
		}
	}
	return nil
}

// kvRows is the number of rows in layer i's KV cache: its ring, or one per
// position.
func (s *Session) kvRows(i int) int {
	if s.kvLen[i] > 0 {
		return s.kvLen[i]
	}
	return s.maxLen
}

// ringLen is the number of positions a sliding-window layer's KV ring
// holds in a session of maxLen positions whose steps take at most chunk
// tokens and that can rewind depth of them: a step's first query reads
// window-1 positions before it while the step writes chunk rows, and a
// rewind must find the window before its new end intact. 0 (one row per
// position) when that is not shorter than maxLen.
func ringLen(window, chunk, depth, maxLen int) int {
	if window <= 0 {
		return 0
	}
	r := window + max(chunk, depth, 1)
	if r >= maxLen {
		return 0
	}
	return r
}

// ringed reports whether a layer keeps a KV ring: then, as with recurrent
// state, only the last rewind depth positions can be rewound.
func (s *Session) ringed() bool {
	for _, n := range s.kvLen {
		if n > 0 {
			return true
		}
	}
	return false
}

// param reserves a uniform slot for one op's parameters.
func (s *Session) param(vals ...any) Binding {
	data := params(vals...)
	off := uint64(len(s.pData))
	s.pData = append(s.pData, data...)
	for uint64(len(s.pData))%s.slot != 0 {
		s.pData = append(s.pData, 0)
	}
	return Binding{Off: off, Size: uint64(len(data))} // Buf set once the buffer exists
}

type pendingOp struct {
	o       *op
	p       *Pipeline
	binds   []Binding
	label   string
	prefill bool // the bind group is o.gm
	second  bool // o's second bind group: o is already in the graph
}

// build lays out every op of the graph, then creates the parameter buffer
// and the bind groups, once for the session's lifetime.
func (s *Session) build() error {
	b := s.b
	a := b.arch
	s.slot = uint64(max(64, int(b.dev.Limits().MinUniformBufferOffsetAlignment)))
	var pend []pendingOp
	add := func(label string, o *op, p *Pipeline, binds ...Binding) *op {
		o.label = label
		pend = append(pend, pendingOp{o: o, p: p, binds: binds, label: label})
		return o
	}
	W := Whole
	stepB := W(s.step)
	bias := func(buf *Buffer) (Binding, bool) {
		if buf == nil {
			return W(b.zero), false
		}
		return W(buf), true
	}
	// matmul adds one projection: out[t*outStride+outOff+o] (=|+=) alpha*W·x.
	matmul := func(label string, w *dweight, x, out *Buffer, biasBuf *Buffer, mode int, alpha, softcap float32, sel int, outStride, outOff int, rows rowsOf) error {
		mv, rpw, err := b.matvecPipe(w.codec, w.rows, w.cols, false)
		if err != nil {
			return err
		}
		mm, err := b.matmulPipe(w.codec, gemmTB, gemmRows)
		if err != nil {
			return err
		}
		bb, hasBias := bias(biasBuf)
		gx, gy := matmulGrid(w.rows, rpw)
		mx, my := matmulGrid(w.rows, gemmRows)
		o := &op{mv: mv, mm: mm, rows: rows, x: gx, y: gy, mx: mx, my: my, zRows: true, wgBytes: w.bytes, gemmRows: w.rows, gemmCodec: w.codec}
		add(label, o, mv, s.param(w.rows, w.cols, w.soff, mode, alpha, softcap, sel, hasBias, outStride, outOff),
			stepB, W(w.buf), W(x), W(out), bb)
		return nil
	}
	norm := func(label string, wbuf *Buffer, x, out *Buffer, n, sub int, mode int, alpha float32, sel int, inStride, inOff, outStride, outOff int, rows rowsOf) error {
		inPlace := x == out
		p, err := b.normPipe(inPlace)
		if err != nil {
			return err
		}
		o := &op{mv: p, rows: rows, x: uint32(sub), y: 1, perRow: true}
		pb := s.param(n, a.NormEps, a.Norm == model.NormRMSPlusOne, mode, alpha, sel, inStride, inOff, outStride, outOff)
		if inPlace {
			add(label, o, p, pb, stepB, W(wbuf), W(x))
		} else {
			add(label, o, p, pb, stepB, W(wbuf), W(x), W(out))
		}
		return nil
	}

	// fuseNorm gives the matmul just added (reading normOp's output) a
	// one-token variant that reads normOp's input raw and applies the norm
	// itself (shaders.MatmulRowsNorm), writing out with mode and act as
	// given; normOp is then left out of one-token steps.
	// oneToken gives the matmul op just added a one-token variant: its
	// own pipeline p (o.mv) and bind group binds; the op's first bind
	// group then serves the prefill pipelines only.
	oneToken := func(p *Pipeline, label string, binds ...Binding) {
		o := pend[len(pend)-1].o
		pend[len(pend)-1].prefill = true
		o.mv = p
		pend = append(pend, pendingOp{o: o, p: p, label: label, second: true, binds: binds})
	}
	fuseNorm := func(normOp *op, nw *Buffer, w *dweight, biasBuf, out *Buffer, mode, act, outStride, outOff int) error {
		if a.Norm == model.NormRMSPlusOne {
			act |= 2
		}
		np, _, err := b.matvecPipe(w.codec, w.rows, w.cols, true)
		if err != nil {
			return err
		}
		bb, hasBias := bias(biasBuf)
		oneToken(np, pend[len(pend)-1].label+" (norm)",
			s.param(w.rows, w.cols, w.soff, mode, float32(1), float32(0), 0, hasBias, outStride, outOff, act, a.NormEps),
			stepB, W(w.buf), W(s.x), W(out), bb, W(nw))
		normOp.prefillOnly = true
		return nil
	}

	// Embedding.
	ep, err := b.embedPipe(b.emb.codec)
	if err != nil {
		return err
	}
	s.embed = add("embed", &op{mv: ep, rows: rowsTok, x: uint32((a.Hidden/4 + 63) / 64), y: 1, perRow: true}, ep,
		s.param(a.Hidden, b.emb.soff, b.embScale, 0), stepB, W(s.tokens), W(b.emb.buf), W(s.x))

	rs := a.Scales().Residual
	prepP, err := b.kvPipe("qkv_prep", kindsPrep)
	if err != nil {
		return err
	}
	attnP, err := b.kvPipe("attention", kindsAttn)
	if err != nil {
		return err
	}
	combP, err := b.namedPipe("attn_combine", kindsCombine)
	if err != nil {
		return err
	}
	actP, err := b.namedPipe("act_mul", kindsAct)
	if err != nil {
		return err
	}
	s.layerOps = make([][]*op, len(a.Layers))
	csTables := map[string]*Buffer{}
	for i, dl := range b.layers {
		if dl == nil {
			continue
		}
		start := len(pend)
		l, at := dl.spec, dl.at
		lbl := func(s string) string { return fmt.Sprintf("L%d %s", i, s) }
		in := s.x
		// normOp and normW: the pre-norm just added, whose one-token
		// work the matvecs that read its output take over (fuseNorm).
		var normOp *op
		var normW *Buffer
		if l.PreMixerNorm {
			if err := norm(lbl("attn norm"), dl.attnNorm, s.x, s.h, a.Hidden, 1, 0, 1, 0, a.Hidden, 0, a.Hidden, 0, rowsTok); err != nil {
				return err
			}
			in = s.h
			if at != nil && dl.qGate == nil {
				normOp, normW = pend[len(pend)-1].o, dl.attnNorm
			}
		}
		attn := &op{}
		if at == nil {
			if err := s.buildMixer(i, dl, in, add, matmul); err != nil {
				return err
			}
		} else {
			qkvw := dl.qw + 2*dl.kvw
			off := 0
			for j, w := range dl.qkv {
				bb := dl.qkvBias
				if dl.biasParts != nil {
					bb = dl.biasParts[j]
				}
				if err := matmul(lbl("qkv"), w, in, s.qkv, bb, 0, 1, 0, 0, qkvw, off, rowsTok); err != nil {
					return err
				}
				if normOp != nil {
					if err := fuseNorm(normOp, normW, w, bb, s.qkv, 0, 0, qkvw, off); err != nil {
						return err
					}
				}
				off += w.rows
			}
			if err := s.gateProj(i, dl, in, matmul); err != nil {
				return err
			}
			qkNormPerHead := false
			switch at.QKNorm {
			case model.QKNormFull:
				if err := norm(lbl("q norm"), dl.qNorm, s.qkv, s.qkv, dl.qw, 1, 0, 1, 0, qkvw, 0, qkvw, 0, rowsTok); err != nil {
					return err
				}
				if err := norm(lbl("k norm"), dl.kNorm, s.qkv, s.qkv, dl.kvw, 1, 0, 1, 0, qkvw, dl.qw, qkvw, dl.qw, rowsTok); err != nil {
					return err
				}
			case model.QKNormPerHead:
				qkNormPerHead = true
			}
			cs := b.zero
			rot := at.Rope.Dims
			if rot > 0 {
				key := fmt.Sprint(dl.rope.InvFreq, dl.rope.MScale)
				if cs = csTables[key]; cs == nil {
					if cs, err = s.buf(lbl("rope"), 4*2*(rot/2)*s.maxLen); err != nil {
						return err
					}
					if err := b.dev.Write(cs, 0, F32Bytes(dl.rope.CosSinRows(s.maxLen))); err != nil {
						return err
					}
					csTables[key] = cs
				}
			}
			style := 0
			if at.Rope.Style == model.RopeInterleaved {
				style = 1
			}
			qkn := b.zero
			if qkNormPerHead {
				qkn = dl.qkn
			}
			add(lbl("qkv prep"), &op{mv: prepP, rows: rowsTok, x: uint32(at.Heads + 2*at.KVHeads), y: 1, perRow: true}, prepP,
				s.param(at.Heads, at.KVHeads, at.HeadDim, rot, style, qkNormPerHead, a.NormEps, a.Norm == model.NormRMSPlusOne, dl.knOff, s.kvLen[i], 0, 0),
				stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(cs), W(qkn))
			attn = add(lbl("attention"), &op{mv: attnP, rows: rowsTok, x: uint32(at.Heads), y: 1, perRow: true, window: at.Window}, attnP,
				s.param(at.Heads, at.KVHeads, at.HeadDim, at.Window, at.Scale, at.Softcap, qkvw, 0, 1, s.kvLen[i], dl.sinks != nil, s.kvRows(i)*dl.kvw/4),
				stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(s.att), W(b.zero))
			// The split-K variant and its combine for parts of splitLen
			// positions, at most splits of them.
			splitK := func(splitLen, splits int) (split, combine *op) {
				split = add(lbl("attention split"), &op{mv: attnP, x: uint32(at.Heads)}, attnP,
					s.param(at.Heads, at.KVHeads, at.HeadDim, at.Window, at.Scale, at.Softcap, qkvw, splitLen, splits, s.kvLen[i], dl.sinks != nil, s.kvRows(i)*dl.kvw/4),
					stepB, W(s.qkv), W(s.kc[i]), W(s.vc[i]), W(s.att), W(s.part))
				combine = add(lbl("attention combine"), &op{mv: combP, rows: rowsTok, x: uint32(at.Heads), y: 1, perRow: true}, combP,
					s.param(at.Heads, at.HeadDim, at.Window, splitLen, splits, 0, 0, 0),
					stepB, W(s.part), W(s.att))
				return split, combine
			}
			if s.maxSplits > 1 {
				attn.split, attn.combine = splitK(s.splitLen, s.maxSplits)
			}
			attn.tiled = b.attnPrefillPipe(at.HeadDim)
			if s.decSplits > 1 {
				attn.splitDec, attn.combineDec = splitK(s.decSplitLen, s.decSplits)
			}
			if err := s.gateApply(i, dl, add); err != nil {
				return err
			}
		}
		if l.PostMixerNorm {
			if err := matmul(lbl("o"), dl.o, s.att, s.tmp, dl.oBias, 0, 1, 0, 0, a.Hidden, 0, rowsTok); err != nil {
				return err
			}
			if err := norm(lbl("post attn norm"), dl.postAttnNorm, s.tmp, s.x, a.Hidden, 1, 1, rs, 0, a.Hidden, 0, a.Hidden, 0, rowsTok); err != nil {
				return err
			}
		} else if err := matmul(lbl("o"), dl.o, s.att, s.x, dl.oBias, 1, rs, 0, 0, a.Hidden, 0, rowsTok); err != nil {
			return err
		}
		in = s.x
		normOp, normW = nil, nil
		if l.PreFFNNorm {
			if err := norm(lbl("ffn norm"), dl.ffnNorm, s.x, s.h, a.Hidden, 1, 0, 1, 0, a.Hidden, 0, a.Hidden, 0, rowsTok); err != nil {
				return err
			}
			in = s.h
			if dl.moe == nil {
				normOp, normW = pend[len(pend)-1].o, dl.ffnNorm
			}
		}
		if dl.moe != nil {
			if err := s.buildMoE(i, dl, in, add, matmul, norm); err != nil {
				return err
			}
		} else {
			act := 0
			if a.Act == model.ActGELUTanh {
				act = 1
			}
			// Interleaved gate/up rows: one-token steps apply the
			// activation in the matvec (mode 2, straight into act); longer
			// steps write gu and run act_mul over the interleaved rows.
			fused := dl.guInterleaved && b.matvecPairsRows(dl.gu[0])
			off := 0
			for _, w := range dl.gu {
				if err := matmul(lbl("gate/up"), w, in, s.gu, nil, 0, 1, 0, 0, 2*dl.f, off, rowsTok); err != nil {
					return err
				}
				switch {
				case normOp != nil && fused:
					if err := fuseNorm(normOp, normW, w, nil, s.act, 2, act, dl.f, 0); err != nil {
						return err
					}
				case normOp != nil:
					if err := fuseNorm(normOp, normW, w, nil, s.gu, 0, 0, 2*dl.f, off); err != nil {
						return err
					}
				case fused:
					oneToken(pend[len(pend)-1].o.mv, lbl("gate/up act"),
						s.param(w.rows, w.cols, w.soff, 2, float32(1), float32(0), 0, false, dl.f, 0, act), stepB, W(w.buf), W(in), W(s.act), W(b.zero))
				}
				off += w.rows
			}
			add(lbl("act"), &op{mv: actP, rows: rowsTok, x: uint32((dl.f + 63) / 64), y: 1, perRow: true, prefillOnly: fused}, actP,
				s.param(dl.f, act, dl.guInterleaved, 0), stepB, W(s.gu), W(s.act))
			if l.PostFFNNorm {
				if err := matmul(lbl("down"), dl.down, s.act, s.tmp, nil, 0, 1, 0, 0, a.Hidden, 0, rowsTok); err != nil {
					return err
				}
				if err := norm(lbl("post ffn norm"), dl.postFFNNorm, s.tmp, s.x, a.Hidden, 1, 1, rs, 0, a.Hidden, 0, a.Hidden, 0, rowsTok); err != nil {
					return err
				}
			} else if err := matmul(lbl("down"), dl.down, s.act, s.x, nil, 1, rs, 0, 0, a.Hidden, 0, rowsTok); err != nil {
				return err
			}
		}
		for _, p := range pend[start:] {
			if !p.second && p.o != attn.split && p.o != attn.combine && p.o != attn.splitDec && p.o != attn.combineDec {
				s.layerOps[i] = append(s.layerOps[i], p.o)
			}
		}
	}
	// Head: final norm of the head rows, then the vocabulary projection.
	start := len(pend)
	if err := norm("final norm", b.finalNorm, s.x, s.h, a.Hidden, 1, 0, 1, 1, a.Hidden, 0, a.Hidden, 0, rowsHead); err != nil {
		return err
	}
	if err := matmul("lm head", b.head, s.h, s.logits, nil, 0, a.Scales().Logit, a.FinalSoftcap, 2, a.Vocab, 0, rowsHead); err != nil {
		return err
	}
	for _, p := range pend[start:] {
		if !p.second {
			s.headOps = append(s.headOps, p.o)
		}
	}
	// The greedy pick: argmax_part's workgroups each reduce a span of
	// the row, argmax the spans' picks.
	apP, err := b.namedPipe("argmax_part", kindsArgmaxPart)
	if err != nil {
		return err
	}
	amP, err := b.namedPipe("argmax", kindsArgmax)
	if err != nil {
		return err
	}
	per, parts := argmaxSpans(a.Vocab)
	s.argmaxPart = add("argmax part", &op{mv: apP, rows: rowsOne, x: uint32(parts), y: 1}, apP,
		s.param(a.Vocab, per, 0, 0), stepB, W(s.logits), W(s.picks))
	s.argmax = add("argmax", &op{mv: amP, rows: rowsOne, x: 1, y: 1}, amP,
		s.param(parts, 0, 0, 0), stepB, W(s.picks), W(s.tokens), W(s.ids))
	advP, err := b.namedPipe("advance", kindsAdvance)
	if err != nil {
		return err
	}
	s.advance = add("advance", &op{mv: advP, rows: rowsOne, x: 1, y: 1}, advP, W(s.step))

	// One uniform buffer holds every op's parameters.
	pbuf, err := b.dev.newBuffer("params", uint64(len(s.pData)), wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
	if err != nil {
		return err
	}
	s.params = pbuf
	s.bufs = append(s.bufs, pbuf)
	if err := b.dev.Write(pbuf, 0, s.pData); err != nil {
		return err
	}
	for _, p := range pend {
		binds := p.binds
		if p.p.kinds[0] == Uniform {
			binds[0].Buf = pbuf
		}
		g, err := b.dev.BindGroup(p.p, p.label, binds...)
		if err != nil {
			return err
		}
		if p.prefill {
			p.o.gm = g
		} else {
			p.o.g = g
		}
		s.groups = append(s.groups, g)

	}
	return nil
}

// encodeLayers appends the dispatches of layers [from, to) for n rows;
// posEnd bounds the positions attended to (it picks split-K attention).
func (s *Session) encodeLayers(ds []Dispatch, from, to, n, headRows, posEnd int) []Dispatch {
	for i := from; i < to; i++ {
		for _, o := range s.layerOps[i] {
			if o.prefillOnly && n == 1 {
				continue
			}
			span := posEnd
			if o.window > 0 {
				span = min(span, o.window)
			}
			// One token: z covers every step of a greedy batch (the
			// kernel's own split span is never shorter than decSplitLen;
			// parts past a step's span are empty).
			if o.splitDec != nil && n == 1 {
				if z := min((span+s.decSplitLen-1)/s.decSplitLen, s.decSplits); z >= 2 {
					ds = append(ds, Dispatch{P: o.splitDec.mv, G: o.splitDec.g, X: o.splitDec.x, Y: 1, Z: uint32(z), Label: o.splitDec.label},
						o.combineDec.dispatch(n, headRows))
					continue
				}
			}
			if o.tiled != nil && n >= tiledMinTokens {
				ds = append(ds, Dispatch{P: o.tiled, G: o.g, X: o.x, Y: uint32((n + attnBlock - 1) / attnBlock), Z: 1, Label: o.label + " tiled"})
				continue
			}
			if o.split != nil {
				if z := (span + s.splitLen - 1) / s.splitLen; z >= 2 {
					ds = append(ds, Dispatch{P: o.split.mv, G: o.split.g, X: o.split.x, Y: uint32(n), Z: uint32(min(z, s.maxSplits)), Label: o.split.label},
						o.combine.dispatch(n, headRows))
					continue
				}
			}
			ds = append(ds, o.dispatch(n, headRows))
		}
	}
	return ds
}

// prepareGemm builds the tiled GEMM pipelines the first time a step is long
// enough to use them. Not at load: the large tilings are big shaders, and
// a software adapter (SwiftShader in a browser) spent seconds compiling
// them for a session that never saw a long prompt. A GEMM that does not
// build leaves its matmul on the row-blocked kernel, which is correct,
// only slower.
func (s *Session) prepareGemm(n int) {
	if s.gemmReady || n < gemmMinTokens {
		return
	}
	s.gemmReady = true
	prep := func(ops []*op) {
		for _, o := range ops {
			if o.mm != nil && o.gemmRows > 0 && o.gemm.p == nil {
				if k, err := s.b.gemmFor(o.gemmCodec, o.gemmRows); err == nil {
					o.gemm = k
				}
			}
		}
	}
	for _, ops := range s.layerOps {
		prep(ops)
	}
	prep(s.headOps)
}

// Len is the number of positions consumed.
func (s *Session) Len() int { return s.pos }

// Reset forgets every position; buffers and bind groups are kept.
func (s *Session) Reset() {
	s.pos = 0
	s.lo = 0
	s.inflight = nil
	s.greedyTail = false
	s.broken = nil
	if s.host != nil {
		s.host.Reset()
	}
}

// Close releases the session's device memory.
func (s *Session) Close() error {
	for _, g := range s.groups {
		g.Release()
	}
	s.groups = nil
	for _, buf := range s.bufs {
		buf.Release()
	}
	s.b.addResident(-s.resid)
	s.resid = 0
	s.bufs = nil
	if s.host != nil {
		err := s.host.Close()
		s.host = nil
		return err
	}
	return nil
}

func (s *Session) writeStep(pos0, n, headRow0, headRows int) error {
	v := []uint32{uint32(pos0), uint32(n), uint32(headRow0), uint32(headRows), 0, 0, 0, 0}
	return s.b.dev.Write(s.step, 0, U32Bytes(v))
}

func (s *Session) fail(err error) error {
	s.broken = err
	return err
}

// Forward consumes tokens and returns the logits of the last position, or
// of every position when all is true ([len(tokens)*vocab]).
func (s *Session) Forward(tokens []int, all bool) ([]float32, error) {
	if s.broken != nil {
		return nil, fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	if len(tokens) == 0 {
		return nil, errors.New("webgpu: Forward with no tokens")
	}
	a := s.b.arch
	if s.pos+len(tokens) > s.maxLen {
		return nil, fmt.Errorf("webgpu: %d positions exceed the session's %d", s.pos+len(tokens), s.maxLen)
	}
	for _, t := range tokens {
		if t < 0 || t >= a.Vocab {
			return nil, fmt.Errorf("webgpu: token %d outside the vocabulary (%d)", t, a.Vocab)
		}
	}
	if traceSteps {
		defer func(t0 time.Time) {
			fmt.Fprintf(os.Stderr, "webgpu: Forward of %d tokens: %v\n", len(tokens), time.Since(t0))
		}(time.Now())
	}
	var out []float32
	if all {
		out = make([]float32, 0, len(tokens)*a.Vocab)
	}
	step := s.chunk
	if all {
		step = s.headChunk
	}
	for c0 := 0; c0 < len(tokens); c0 += step {
		chunk := tokens[c0:min(c0+step, len(tokens))]
		last := c0+len(chunk) == len(tokens)
		logits, _, err := s.forwardChunk(chunk, all, last, false)
		if err != nil {
			return nil, s.fail(err)
		}
		if all {
			out = append(out, logits...)
		} else if last {
			out = logits
		}
	}
	return out, nil
}

// VerifyGreedy consumes tokens, as Forward with all does, and returns the
// argmax of every position's logits (the lowest index on ties, as
// ForwardGreedy picks), taken on the device: one submit per headChunk
// positions reading back 4 bytes a position instead of a vocabulary of
// logits. It is speculative decoding's greedy verification
// (backend.GreedyVerifier); a row holding a NaN or infinity is an error.
func (s *Session) VerifyGreedy(tokens []int) ([]int, error) {
	if s.broken != nil {
		return nil, fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	if len(tokens) == 0 {
		return nil, errors.New("webgpu: VerifyGreedy with no tokens")
	}
	a := s.b.arch
	if s.pos+len(tokens) > s.maxLen {
		return nil, fmt.Errorf("webgpu: %d positions exceed the session's %d", s.pos+len(tokens), s.maxLen)
	}
	for _, t := range tokens {
		if t < 0 || t >= a.Vocab {
			return nil, fmt.Errorf("webgpu: token %d outside the vocabulary (%d)", t, a.Vocab)
		}
	}
	out := make([]int, 0, len(tokens))
	for c0 := 0; c0 < len(tokens); c0 += s.headChunk {
		chunk := tokens[c0:min(c0+s.headChunk, len(tokens))]
		_, ids, err := s.forwardChunk(chunk, true, true, true)
		if err != nil {
			return nil, s.fail(err)
		}
		out = append(out, ids...)
	}
	return out, nil
}

// forwardChunk runs one step of tokens; with picks (and all) it returns
// the argmax of every row instead of the logits.
func (s *Session) forwardChunk(tokens []int, all, last, picks bool) ([]float32, []int, error) {
	if len(s.inflight) > 0 {
		return nil, nil, errors.New("webgpu: Forward while greedy batches are in flight")
	}
	s.greedyTail = false
	s.prepareGemm(len(tokens))
	b := s.b
	a := b.arch
	d := b.dev
	n := len(tokens)
	head := all || last
	headRow0, headRows := n-1, 1
	if all {
		headRow0, headRows = 0, n
	}
	if err := s.writeStep(s.pos, n, headRow0, headRows); err != nil {
		return nil, nil, err
	}
	ids := make([]uint32, n)
	for i, t := range tokens {
		ids[i] = uint32(t)
	}
	if err := s.b.dev.Write(s.tokens, 0, U32Bytes(ids)); err != nil {
		return nil, nil, err
	}
	var submits, hostRuns int64
	ds := []Dispatch{s.embed.dispatch(n, headRows)}
	for i := 0; i < len(a.Layers); {
		if s.layerOps[i] != nil {
			ds = s.encodeLayers(ds, i, i+1, n, headRows, s.pos+n)
			i++
			continue
		}
		// A host segment: bring x back, run the layers there, send it out.
		j := i
		for j < len(a.Layers) && s.layerOps[j] == nil {
			j++
		}
		bytes := uint64(4 * n * a.Hidden)
		if err := d.Run(nil, ds, []Copy{{Src: s.x, Dst: s.stX, Size: bytes}}); err != nil {
			return nil, nil, err
		}
		submits++
		raw, err := d.Read(s.stX, bytes)
		if err != nil {
			return nil, nil, err
		}
		x := BytesF32(raw)
		if err := s.host.ForwardLayers(x, n, s.pos, i, j); err != nil {
			return nil, nil, fmt.Errorf("webgpu: host layers %d-%d: %w", i, j-1, err)
		}
		hostRuns += int64(j - i)
		if err := s.b.dev.Write(s.x, 0, F32Bytes(x)); err != nil {
			return nil, nil, err
		}
		ds = ds[:0]
		i = j
	}
	var logits []float32
	var picked []int
	if head && picks {
		for _, o := range s.headOps {
			ds = append(ds, o.dispatch(n, headRows))
		}
		part, pick := s.argmaxPart.dispatch(1, 1), s.argmax.dispatch(1, 1)
		part.Y, pick.Y = uint32(headRows), uint32(headRows)
		ds = append(ds, part, pick)
		st := s.stIDs[s.nextSlot]
		if err := d.Run(nil, ds, []Copy{{Src: s.ids, Dst: st, Size: uint64(4 * headRows)}}); err != nil {
			return nil, nil, err
		}
		submits++
		raw, err := d.Read(st, uint64(4*headRows))
		if err != nil {
			return nil, nil, err
		}
		picked = make([]int, headRows)
		for r := range picked {
			picked[r] = int(binary.LittleEndian.Uint32(raw[4*r:]))
			if picked[r] == argmaxPoison {
				return nil, nil, fmt.Errorf("webgpu: non-finite logits (NaN or infinity) at position %d", s.pos+headRow0+r)
			}
			if picked[r] >= a.Vocab {
				return nil, nil, fmt.Errorf("webgpu: device picked token %d outside the vocabulary", picked[r])
			}
		}
	} else if head {
		for _, o := range s.headOps {
			ds = append(ds, o.dispatch(n, headRows))
		}
		bytes := uint64(4 * headRows * a.Vocab)
		t0 := time.Now()
		if err := d.Run(nil, ds, []Copy{{Src: s.logits, Dst: s.stLogits, Size: bytes}}); err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		submits++
		var err error
		logits, err = d.ReadF32(s.stLogits, headRows*a.Vocab)
		if err != nil {
			return nil, nil, err
		}
		if traceSteps {
			fmt.Fprintf(os.Stderr, "webgpu: step of %d tokens: %d dispatches, encode+submit %v, wait+read %v\n", n, len(ds), t1.Sub(t0), time.Since(t1))
		}
	} else {
		if err := d.Run(nil, ds, nil); err != nil {
			return nil, nil, err
		}
		submits++
	}
	s.consumed(n)
	b.count(submits, int64(n), hostRuns)
	return logits, picked, nil
}

// ForwardGreedy consumes token first, then picks k tokens greedily on the
// device, each pick feeding the next step's embedding, all in one submit
// with one readback of the k ids. It consumes k positions (first and the
// first k-1 picks); the last pick is returned but not yet consumed, as with
// Forward followed by an argmax. The picks equal argmax of Forward's logits
// (lowest index on ties). It needs every layer on the device; otherwise it
// returns an error wrapping ErrUnsupported and the caller uses Forward.
func (s *Session) ForwardGreedy(first, k int) ([]int, error) {
	g, err := s.SubmitGreedy(first, k)
	if err != nil {
		return nil, err
	}
	return s.CollectGreedy(g)
}

// GreedyBatch is a submitted run of greedy steps whose picks have not been
// read back yet.
type GreedyBatch struct {
	k, slot int
}

// Steps is the number of greedy steps in the batch.
func (g *GreedyBatch) Steps() int { return g.k }

// SubmitGreedy is ForwardGreedy without the wait: it submits the k steps
// and returns at once, so the host can encode the next batch while the
// device runs this one. first < 0 continues from the device's own last
// pick (the previous batch's, which the host may not have read yet). At
// most two batches may be outstanding; CollectGreedy reads them in order.
func (s *Session) SubmitGreedy(first, k int) (*GreedyBatch, error) {
	if s.broken != nil {
		return nil, fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	b := s.b
	a := b.arch
	if k <= 0 || k > s.maxGreedy {
		return nil, fmt.Errorf("webgpu: greedy steps %d outside 1..%d", k, s.maxGreedy)
	}
	if first >= a.Vocab {
		return nil, fmt.Errorf("webgpu: token %d outside the vocabulary (%d)", first, a.Vocab)
	}
	if first < 0 && !s.greedyTail {
		return nil, errors.New("webgpu: a continued greedy batch needs a greedy batch before it")
	}
	if s.pos+k > s.maxLen {
		return nil, fmt.Errorf("webgpu: %d positions exceed the session's %d", s.pos+k, s.maxLen)
	}
	if !s.GreedyOnDevice() {
		return nil, fmt.Errorf("webgpu: %w: greedy steps need every layer on the device", ErrUnsupported)
	}
	if len(s.inflight) == len(s.stIDs) {
		return nil, errors.New("webgpu: too many greedy batches in flight")
	}
	// Queue writes take effect after the work submitted before them, so
	// these never disturb a batch still running.
	if err := s.writeStep(s.pos, 1, 0, 1); err != nil {
		return nil, s.fail(err)
	}
	if first >= 0 {
		if err := s.b.dev.Write(s.tokens, 0, U32Bytes([]uint32{uint32(first)})); err != nil {
			return nil, s.fail(err)
		}
	}
	var ds []Dispatch
	for range k {
		ds = append(ds, s.embed.dispatch(1, 1))
		ds = s.encodeLayers(ds, 0, len(s.layerOps), 1, 1, s.pos+k)
		for _, o := range s.headOps {
			ds = append(ds, o.dispatch(1, 1))
		}
		ds = append(ds, s.argmaxPart.dispatch(1, 1), s.argmax.dispatch(1, 1), s.advance.dispatch(1, 1))
	}
	g := &GreedyBatch{k: k, slot: s.nextSlot}
	s.nextSlot = (s.nextSlot + 1) % len(s.stIDs)
	if err := b.dev.Run(nil, ds, []Copy{{Src: s.ids, Dst: s.stIDs[g.slot], Size: uint64(4 * k)}}); err != nil {
		return nil, s.fail(err)
	}
	s.inflight = append(s.inflight, g)
	s.greedyTail = true
	s.consumed(k)
	b.count(1, int64(k), 0)
	return g, nil
}

// CollectGreedy waits for batch g and returns its k picks. Batches are
// collected in the order they were submitted.
// argmaxPoison is the pick argmax.wgsl reports for a row of logits holding
// a NaN or infinity (POISON in argmax_pick.wgsl).
const argmaxPoison = 0xFFFFFFFE

func (s *Session) CollectGreedy(g *GreedyBatch) ([]int, error) {
	if s.broken != nil {
		return nil, fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	if len(s.inflight) == 0 || s.inflight[0] != g {
		return nil, errors.New("webgpu: greedy batches are collected in submission order")
	}
	s.inflight = s.inflight[1:]
	raw, err := s.b.dev.Read(s.stIDs[g.slot], uint64(4*g.k))
	if err != nil {
		return nil, s.fail(err)
	}
	out := make([]int, g.k)
	for i := range out {
		out[i] = int(binary.LittleEndian.Uint32(raw[4*i:]))
		if out[i] == argmaxPoison {
			return nil, s.fail(fmt.Errorf("webgpu: non-finite logits (NaN or infinity) at greedy step %d of %d", i+1, g.k))
		}
		if out[i] >= s.b.arch.Vocab {
			return nil, s.fail(fmt.Errorf("webgpu: device picked token %d outside the vocabulary", out[i]))
		}
	}
	return out, nil
}

// DropGreedy forgets the newest batch, uncollected: its positions are
// given back exactly, as Rewind does (the cache entries it wrote are
// overwritten by later steps; the recurrent state is the one kept for the
// batch's start). A batch longer than Rewindable allows is refused.
func (s *Session) DropGreedy(g *GreedyBatch) error {
	if len(s.inflight) == 0 || s.inflight[len(s.inflight)-1] != g {
		return errors.New("webgpu: only the newest greedy batch can be dropped")
	}
	if err := s.rewindable(g.k); err != nil {
		return err
	}
	s.inflight = s.inflight[:len(s.inflight)-1]
	s.pos -= g.k
	// The device's last pick is now the dropped batch's: a continuation
	// would start from the wrong token.
	s.greedyTail = false
	return nil
}

// GreedyOnDevice reports whether ForwardGreedy can run: every layer is on
// the device.
func (s *Session) GreedyOnDevice() bool {
	for _, ops := range s.layerOps {
		if ops == nil {
			return false
		}
	}
	return true
}

// ForwardLayers runs decoder layers [from, to) on the device for n hidden
// rows x (n*hidden floats, updated in place) at positions pos0..pos0+n-1,
// writing those positions into the layers' KV caches. It is the HostLayers
// contract, so a device session can serve as another backend's layer runner
// (a model split across two devices). It does not move Len. Every layer in
// the range must be on the device.
func (s *Session) ForwardLayers(x []float32, n, pos0, from, to int) error {
	if s.broken != nil {
		return fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	a := s.b.arch
	if from < 0 || to > len(a.Layers) || from > to {
		return fmt.Errorf("webgpu: layer range %d-%d of %d", from, to, len(a.Layers))
	}
	if n <= 0 || len(x) != n*a.Hidden {
		return fmt.Errorf("webgpu: %d floats for %d rows of %d", len(x), n, a.Hidden)
	}
	if pos0 < 0 || pos0+n > s.maxLen {
		return fmt.Errorf("webgpu: positions %d..%d exceed the session's %d", pos0, pos0+n-1, s.maxLen)
	}
	for i := from; i < to; i++ {
		if s.layerOps[i] == nil {
			return fmt.Errorf("webgpu: %w: layer %d is not on the device", ErrUnsupported, i)
		}
	}
	d := s.b.dev
	s.prepareGemm(min(n, s.chunk))
	for r0 := 0; r0 < n; r0 += s.chunk {
		m := min(s.chunk, n-r0)
		part := x[r0*a.Hidden : (r0+m)*a.Hidden]
		if err := s.writeStep(pos0+r0, m, m-1, 1); err != nil {
			return s.fail(err)
		}
		if err := s.b.dev.Write(s.x, 0, F32Bytes(part)); err != nil {
			return s.fail(err)
		}
		ds := s.encodeLayers(nil, from, to, m, 1, pos0+r0+m)
		bytes := uint64(4 * len(part))
		if err := d.Run(nil, ds, []Copy{{Src: s.x, Dst: s.stX, Size: bytes}}); err != nil {
			return s.fail(err)
		}
		raw, err := d.Read(s.stX, bytes)
		if err != nil {
			return s.fail(err)
		}
		copy(part, BytesF32(raw))
		s.b.count(1, 0, 0)
	}
	return nil
}

var _ backend.GreedyVerifier = (*Session)(nil)

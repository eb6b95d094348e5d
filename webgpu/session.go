package webgpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
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
	mv, mm  *gpu.Pipeline // mm (token-blocked) is used when more than one row
	mmTB    int           // tokens per workgroup of mm (Tuning.GemmTB)
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
	// dec and splitDecPrep are the one-token single-pass and split-K
	// variants with the qkv prep fused in (shaders.AttentionPrep), when
	// built: the prep op is then left out of one-token steps (fusedAtOne).
	dec, splitDecPrep *op
	// combInto is the op after this attention whose one-token variant
	// comb merges the split-K partials itself (shaders.MatvecComb): a
	// split one-token step then dispatches no combine, and that op runs
	// comb instead of its own one-token kernel.
	combInto, comb *op
	// tiled is the attention for steps of tiledMinTokens or more
	// (shaders.AttnPrefill; o's bind group and uniform), nil where the
	// head dimension does not suit it.
	tiled *gpu.Pipeline

	gm          *wgpu.BindGroup // the prefill pipelines' bind group, when it differs from g
	gemm        gemmKernel      // matmuls: the tiled GEMM for steps of gemmMinTokens or more (see prepareGemm)
	gemmRows    int
	gemmCodec   tensor.Codec
	prefillOnly bool // left out of one-token and small steps (done by a fused kernel there)
	fusedAtOne  bool // left out of one-token steps only (the qkv prep, fused into attention there)
	// small is a dense projection's batched matvec for small steps
	// (small.go); nil for other ops.
	small  *smallMM
	window int
	label  string
}

func (o *op) dispatch(ntok, headRows int) gpu.Dispatch {
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
		p, tb = o.mm, o.mmTB
	}
	d := gpu.Dispatch{P: p, G: o.g, X: o.x, Y: o.y, Z: 1, Label: o.label}
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

	bufs   []*gpu.Buffer
	groups []*wgpu.BindGroup
	resid  int64
	params *gpu.Buffer
	pData  []byte
	slot   uint64

	splitLen, maxSplits          int
	decSplitLen, decSplits       int // the same for one-token steps
	part                         *gpu.Buffer
	step, tokens, ids            *gpu.Buffer
	picks                        *gpu.Buffer // argmax_part's per-span picks
	x, h, qkv, att, tmp, gu, act *gpu.Buffer
	blr                          *gpu.Buffer // between a two-product weight's stages
	logits, stLogits, stX        *gpu.Buffer
	stIDs                        []*gpu.Buffer  // one per greedy batch in flight
	inflight                     []*GreedyBatch // submitted, not collected, oldest first
	nextSlot                     int
	greedyTail                   bool                     // tokens[0] on the device holds the last greedy pick
	gemmReady                    bool                     // prepareGemm ran
	smallTried, smallOK          [maxSmallTokens + 1]bool // prepareSmall ran for a step length, and its kernels built
	smallNow                     bool                     // the step being encoded may run as a small step (it returns every row)
	partRows                     int                      // token x split rows the attention partials hold
	kc, vc                       []*gpu.Buffer
	kvLen                        []int // per layer: rows of a sliding-window layer's KV ring; 0 = maxLen rows, one per position
	embed                        *op
	layerOps                     [][]*op // per layer; nil on layers off the device
	headOps                      []*op
	argmaxPart, argmax, advance  *op
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

// combMaxSplits is the most split-K parts a one-token step merges in its
// output projection (combineInto): each of that matvec's workgroups reads
// every part of every head, and on an H200 (llama-1b decode) the merge won
// at 10 parts after 512 tokens (q4_0 +3.1%, q8_0 +1.7%, q4_K_M +0.7%)
// and lost at 32 after 2048 for q8_0 (-1.1%) and q4_K_M (-1.4%); above it
// attn_combine runs as its own dispatch.
const combMaxSplits = 16

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
	limit := uint64(gpu.MaxBinding)
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
	ok = true
	return s, nil
}

func (s *Session) buf(label string, size int) (*gpu.Buffer, error) {
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
	s.partRows = max(c*s.maxSplits, s.decSplits)
	type spec struct {
		dst  **gpu.Buffer
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
		{&s.blr, "blr scratch", c * max(1, s.b.blrRank)},
		{&s.logits, "logits", s.headChunk * a.Vocab},
		{&s.part, "attention partials", s.partRows * s.b.maxHeads * (s.b.maxHD + 2)},
	}
	for _, sp := range specs {
		var err error
		if *sp.dst, err = s.buf(sp.name, 4*sp.n); err != nil {
			return err
		}
	}
	var err error
	for _, st := range []struct {
		dst **gpu.Buffer
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
	s.kc = make([]*gpu.Buffer, len(a.Layers))
	s.vc = make([]*gpu.Buffer, len(a.Layers))
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
			if err := s.b.dev.Write(s.kc[i], uint64(rows*dl.kvw*s.b.kvElem()), gpu.F32Bytes(pad)); err != nil {
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

// encodeLayers appends the dispatches of layers [from, to) for n rows;
// posEnd bounds the positions attended to (it picks split-K attention).
func (s *Session) encodeLayers(ds []gpu.Dispatch, from, to, n, headRows, posEnd int) []gpu.Dispatch {
	var comb *op // the op that merges the last split attention's partials
	small := s.small(n)
	for i := from; i < to; i++ {
		for _, o := range s.layerOps[i] {
			if o.prefillOnly && (n == 1 || small) || o.fusedAtOne && n == 1 {
				continue
			}
			if o == comb {
				ds = append(ds, o.comb.dispatch(n, headRows))
				comb = nil
				continue
			}
			span := posEnd
			if o.window > 0 {
				span = min(span, o.window)
			}
			// One token: z covers every step of a greedy batch (the
			// kernel's own split span is never shorter than decSplitLen;
			// parts past a step's span are empty).
			// A small step splits every row's span as a decode step at
			// its position does (the last row's span sizes z).
			if o.splitDec != nil && (n == 1 || small && n*s.decSplits <= s.partRows) {
				if z := min((span+s.decSplitLen-1)/s.decSplitLen, s.decSplits); z >= 2 {
					sp := o.splitDec
					if n == 1 && o.splitDecPrep != nil {
						sp = o.splitDecPrep
					}
					ds = append(ds, gpu.Dispatch{P: sp.mv, G: sp.g, X: sp.x, Y: uint32(n), Z: uint32(z), Label: sp.label})
					if n == 1 && o.combInto != nil && z <= combMaxSplits {
						comb = o.combInto
					} else {
						ds = append(ds, o.combineDec.dispatch(n, headRows))
					}
					continue
				}
			}
			if o.dec != nil && n == 1 {
				ds = append(ds, o.dec.dispatch(n, headRows))
				continue
			}
			if o.tiled != nil && n >= tiledMinTokens {
				ds = append(ds, gpu.Dispatch{P: o.tiled, G: o.g, X: o.x, Y: uint32((n + s.b.tune.AttnBlock - 1) / s.b.tune.AttnBlock), Z: 1, Label: o.label + " tiled"})
				continue
			}
			if o.split != nil {
				if z := (span + s.splitLen - 1) / s.splitLen; z >= 2 {
					ds = append(ds, gpu.Dispatch{P: o.split.mv, G: o.split.g, X: o.split.x, Y: uint32(n), Z: uint32(min(z, s.maxSplits)), Label: o.split.label},
						o.combine.dispatch(n, headRows))
					continue
				}
			}
			ds = append(ds, s.dispatchOp(o, n, headRows))
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
	return nil
}

func (s *Session) writeStep(pos0, n, headRow0, headRows int) error {
	v := []uint32{uint32(pos0), uint32(n), uint32(headRow0), uint32(headRows), 0, 0, 0, 0}
	return s.b.dev.Write(s.step, 0, gpu.U32Bytes(v))
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
	if !s.GreedyOnDevice() {
		return nil, errSplit
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
	if s.b.tune.TraceSteps {
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
	if !s.GreedyOnDevice() {
		return nil, errSplit
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

// errSplit refuses a whole step on a session holding only some layers.
var errSplit = fmt.Errorf("webgpu: %w: layers off the device: the scheduler runs a split model's steps (EmbedLayers, ForwardLayers, LayersHead)", ErrUnsupported)

// forwardChunk runs one step of tokens; with picks (and all) it returns
// the argmax of every row instead of the logits.
func (s *Session) forwardChunk(tokens []int, all, last, picks bool) ([]float32, []int, error) {
	if len(s.inflight) > 0 {
		return nil, nil, errors.New("webgpu: Forward while greedy batches are in flight")
	}
	s.greedyTail = false
	s.prepareGemm(len(tokens))
	s.beginStep(len(tokens), all)
	defer s.endStep()
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
	if err := s.b.dev.Write(s.tokens, 0, gpu.U32Bytes(ids)); err != nil {
		return nil, nil, err
	}
	var submits int64
	ds := []gpu.Dispatch{s.embed.dispatch(n, headRows)}
	ds = s.encodeLayers(ds, 0, len(a.Layers), n, headRows, s.pos+n)
	var logits []float32
	var picked []int
	if head && picks {
		for _, o := range s.headOps {
			ds = append(ds, s.dispatchOp(o, n, headRows))
		}
		part, pick := s.argmaxPart.dispatch(1, 1), s.argmax.dispatch(1, 1)
		part.Y, pick.Y = uint32(headRows), uint32(headRows)
		ds = append(ds, part, pick)
		st := s.stIDs[s.nextSlot]
		if err := d.Run(nil, ds, []gpu.Copy{{Src: s.ids, Dst: st, Size: uint64(4 * headRows)}}); err != nil {
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
			ds = append(ds, s.dispatchOp(o, n, headRows))
		}
		bytes := uint64(4 * headRows * a.Vocab)
		t0 := time.Now()
		if err := d.Run(nil, ds, []gpu.Copy{{Src: s.logits, Dst: s.stLogits, Size: bytes}}); err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		submits++
		var err error
		logits, err = d.ReadF32(s.stLogits, headRows*a.Vocab)
		if err != nil {
			return nil, nil, err
		}
		if s.b.tune.TraceSteps {
			fmt.Fprintf(os.Stderr, "webgpu: step of %d tokens: %d dispatches, encode+submit %v, wait+read %v\n", n, len(ds), t1.Sub(t0), time.Since(t1))
		}
	} else {
		if err := d.Run(nil, ds, nil); err != nil {
			return nil, nil, err
		}
		submits++
	}
	s.consumed(n)
	b.count(submits, int64(n), 0)
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
// read back yet: the backend.Pending of SubmitGreedy.
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
func (s *Session) SubmitGreedy(first, k int) (backend.Pending, error) {
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
		if err := s.b.dev.Write(s.tokens, 0, gpu.U32Bytes([]uint32{uint32(first)})); err != nil {
			return nil, s.fail(err)
		}
	}
	var ds []gpu.Dispatch
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
	if err := b.dev.Run(nil, ds, []gpu.Copy{{Src: s.ids, Dst: s.stIDs[g.slot], Size: uint64(4 * k)}}); err != nil {
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

func (s *Session) CollectGreedy(p backend.Pending) ([]int, error) {
	g, _ := p.(*GreedyBatch)
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
func (s *Session) DropGreedy(p backend.Pending) error {
	g, _ := p.(*GreedyBatch)
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

// GreedyOnDevice reports whether ForwardGreedy (and Forward) can run:
// every layer is on the device.
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
// writing those positions into the layers' KV caches. It is the
// backend.LayerRunner contract: the scheduler runs the middle of a split
// model's step here. It does not move Len. Every layer in the range must
// be on the device.
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
		if err := s.b.dev.Write(s.x, 0, gpu.F32Bytes(part)); err != nil {
			return s.fail(err)
		}
		ds := s.encodeLayers(nil, from, to, m, 1, pos0+r0+m)
		bytes := uint64(4 * len(part))
		if err := d.Run(nil, ds, []gpu.Copy{{Src: s.x, Dst: s.stX, Size: bytes}}); err != nil {
			return s.fail(err)
		}
		raw, err := d.Read(s.stX, bytes)
		if err != nil {
			return s.fail(err)
		}
		copy(part, gpu.BytesF32(raw))
		s.b.count(1, 0, 0)
	}
	return nil
}

var (
	_ backend.GreedyVerifier = (*Session)(nil)
	_ backend.VerifyPreparer = (*Session)(nil)
	_ backend.GreedyStepper  = (*Session)(nil)
)

package cuda

import (
	"fmt"
	"math"
	"slices"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/cuda/kernels"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// histLen is the device ring of greedy picks: the most steps one greedy
// graph runs.
const histLen = 256

// maxLogitRows bounds the rows of logits computed at once.
const maxLogitRows = 64

// Session is one sequence on the device: its KV cache (full length, rows
// indexed by position, so any number of positions can be rewound), the
// activations of one chunk, and the device step state the kernels read
// their positions from.
type Session struct {
	b      *Backend
	maxLen int
	chunk  int
	pos    int
	kc, vc []driver.Ptr // per layer, [maxLen][kvHeads*headDim] f32 or f16
	kv     string       // the cache element: "f32" or "f16"
	// activations
	x, h, q, k, v, att, o, g, u driver.Ptr
	partO, partML               driver.Ptr
	done                        driver.Ptr // ck_attn_dec1_*'s counters, [MaxBatch][kvHeads] uint32, zero between launches
	logits                      driver.Ptr // [maxLogitRows][vocab]
	ids, state, hist, picks     driver.Ptr
	nsplit                      int32
	graphs                      map[int]driver.Graph
	raw                         bool // the head reads x un-normalized (after a fused pass)
	hist0                       int  // where the next greedy batch's picks land in the ring (-1: no chain)
	allocs                      []driver.Ptr
	bytes                       int64
	closed                      bool

	// The int8 prefill GEMM's input (ck_quant_q8): values and scales, and
	// which activation they hold (qx 0: none that can be reused).
	xq, xds   driver.Ptr
	qx        driver.Ptr
	qcols, qT int
}

// NewSession allocates a session of at most maxLen positions.
func (b *Backend) NewSession(maxLen int) (backend.Session, error) {
	s, err := b.newSession(maxLen)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (b *Backend) newSession(maxLen int) (*Session, error) {
	if maxLen <= 0 {
		return nil, fmt.Errorf("cuda: session of %d positions", maxLen)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.arch
	s := &Session{b: b, maxLen: maxLen, chunk: min(b.opts.Chunk, maxLen), graphs: map[int]driver.Graph{}, kv: "f32", hist0: -1}
	if b.opts.KVF16 {
		s.kv = "f16"
	}
	qd, kvd, ff, heads, hdMax, kvHeads := 0, 0, 0, 0, 0, 0
	cols := a.Hidden // the widest input of a product
	for _, l := range a.Layers {
		hdMax = max(hdMax, l.Attn.HeadDim)
		kvHeads = max(kvHeads, l.Attn.KVHeads)
		qd = max(qd, l.Attn.Heads*l.Attn.HeadDim)
		kvd = max(kvd, l.Attn.KVHeads*l.Attn.HeadDim)
		ff = max(ff, ffnWidth(l.FFNHidden))
		heads = max(heads, l.Attn.Heads)
	}
	cols = max(cols, qd, ff)
	s.nsplit = kernels.DecodeSplits(b.dev.Info().SMs, max(1, a.Layers[0].Attn.KVHeads))
	C := int64(s.chunk)
	dec := int64(kernels.MaxBatch)
	bufs := []struct {
		dst *driver.Ptr
		n   int64
	}{
		{&s.x, C * int64(a.Hidden) * 4}, {&s.h, C * int64(a.Hidden) * 4}, {&s.o, C * int64(a.Hidden) * 4},
		{&s.q, C * int64(qd+2*kvd) * 4}, {&s.att, C * int64(qd) * 4},
		{&s.g, C * int64(ff) * 4}, {&s.u, C * int64(ff) * 4},
		{&s.partO, dec * int64(heads) * int64(s.nsplit) * int64(hdMax) * 4},
		{&s.partML, dec * int64(heads) * int64(s.nsplit) * 2 * 4},
		{&s.done, dec * int64(kvHeads) * 4},
		{&s.logits, int64(min(s.chunk, maxLogitRows)) * int64(a.Vocab) * 4 * int64(b2i(b.last))},
		{&s.ids, C * 4}, {&s.picks, C * 4},
		{&s.state, kernels.StateSize * 4}, {&s.hist, histLen * 4},
	}
	if nq, nds := kernels.QuantBytes(s.chunk, cols); s.chunk > kernels.MaxBatch && !b.opts.Exact {
		bufs = append(bufs, struct {
			dst *driver.Ptr
			n   int64
		}{&s.xq, int64(nq)}, struct {
			dst *driver.Ptr
			n   int64
		}{&s.xds, int64(nds)})
	}
	for _, x := range bufs {
		p, err := s.alloc(x.n)
		if err != nil {
			s.free()
			return nil, err
		}
		*x.dst = p
	}
	if err := b.dev.Zero(s.done, dec*int64(kvHeads)*4); err != nil {
		s.free()
		return nil, err
	}
	// k and v follow q in one region: a chunk's [T][qd] q, then [T][kvd]
	// k and v (one token's q|k|v is also what the fused QKV matvec writes).
	s.k = s.q + driver.Ptr(C*int64(qd)*4)
	s.v = s.k + driver.Ptr(C*int64(kvd)*4)
	for _, bl := range b.layers {
		l := bl.spec
		n := int64(maxLen) * int64(l.Attn.KVHeads*l.Attn.HeadDim) * int64(s.elem())
		kc, err := s.alloc(n)
		if err != nil {
			s.free()
			return nil, err
		}
		vc, err := s.alloc(n)
		if err != nil {
			s.free()
			return nil, err
		}
		s.kc, s.vc = append(s.kc, kc), append(s.vc, vc)
	}
	return s, nil
}

// elem is the bytes of one KV element.
func (s *Session) elem() int {
	if s.kv == "f16" {
		return 2
	}
	return 4
}

func (s *Session) alloc(n int64) (driver.Ptr, error) {
	b := s.b
	if b.budget > 0 && b.bytes+n > b.budget {
		return 0, fmt.Errorf("cuda: a session of %d positions needs %d MiB more than the device budget of %d MiB leaves", s.maxLen, n>>20, b.budget>>20)
	}
	p, err := b.dev.Alloc(n)
	if err != nil {
		return 0, err
	}
	if err := b.dev.Zero(p, n); err != nil {
		b.dev.Free(p)
		return 0, fmt.Errorf("%w (clearing %d bytes at %#x)", err, n, p)
	}
	s.allocs = append(s.allocs, p)
	s.bytes += n
	b.bytes += n
	return p, nil
}

func (s *Session) free() {
	for _, g := range s.graphs {
		s.b.dev.DestroyGraph(g)
	}
	s.graphs = nil
	for _, p := range s.allocs {
		s.b.dev.Free(p)
	}
	s.b.bytes -= s.bytes
	s.allocs, s.bytes = nil, 0
}

// Len is the number of positions consumed.
func (s *Session) Len() int { return s.pos }

// Reset forgets every position.
func (s *Session) Reset() { s.pos, s.hist0 = 0, -1 }

// Close frees the session's device memory.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.closed = true
	if s.b.dev != nil {
		s.free()
	}
	return nil
}

// Rewindable is every consumed position: the KV rows are indexed by
// position and the model has no recurrent state.
func (s *Session) Rewindable() int { return s.pos }

// Rewind drops the newest n positions.
func (s *Session) Rewind(n int) error {
	if n < 0 || n > s.pos {
		return fmt.Errorf("cuda: rewind of %d positions, %d rewindable", n, s.pos)
	}
	s.pos -= n
	s.hist0 = -1
	return nil
}

// setState writes the device step state: position and next token.
func (s *Session) setState(pos, tok int) error {
	st := []int32{int32(pos), int32(tok), 0, 0}
	return s.b.dev.Upload(s.state, driver.Bytes(st))
}

// Forward runs tokens at positions Len()... and returns the last row's
// logits, or every row's when all is true.
func (s *Session) Forward(tokens []int, all bool) ([]float32, error) {
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(tokens) == 1 && b.prof == nil {
		return s.forwardOne(tokens[0])
	}
	var out []float32
	for t0 := 0; t0 < len(tokens); t0 += s.chunk {
		ch := tokens[t0:min(len(tokens), t0+s.chunk)]
		T := len(ch)
		last := t0+T == len(tokens)
		if err := s.upload(ch); err != nil {
			return nil, err
		}
		if err := s.layers(T, 0); err != nil {
			return nil, err
		}
		rows, err := s.logitRows(T, all, last)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		s.pos += T
		b.stats.Submits++
	}
	b.stats.Tokens += int64(len(tokens))
	return out, nil
}

// logitRows computes and reads the logits a chunk of T rows owes the
// caller: every row's when all, else the last row's of the last chunk
// (none of an earlier chunk, which is only synchronized).
func (s *Session) logitRows(T int, all, last bool) ([]float32, error) {
	b := s.b
	from := T - 1
	if all {
		from = 0
	} else if !last {
		return nil, b.dev.Sync()
	}
	var out []float32
	for r := from; r < T; r += maxLogitRows {
		n := min(T-r, maxLogitRows)
		if err := s.head(r, n); err != nil {
			return nil, err
		}
		rows, err := s.readLogits(n)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// readLogits reads the first n rows of the logits buffer (waiting for the
// work before them).
func (s *Session) readLogits(n int) ([]float32, error) {
	b := s.b
	rows := make([]float32, n*b.arch.Vocab)
	if err := b.dev.Read(driver.Bytes(rows), s.logits); err != nil {
		return nil, err
	}
	b.stats.ReadbackBytes += int64(len(rows) * 4)
	// The final softcap (gemma2) on the host, as the CPU computes it;
	// greedy picks on the device need none (tanh keeps the order).
	if c := b.arch.FinalSoftcap; c > 0 {
		for i, v := range rows {
			rows[i] = float32(math.Tanh(float64(v/c))) * c
		}
	}
	return rows, nil
}

// stepGraph is the graphs key of the one-token step that leaves its
// logits (embed the state's token → layers → head): what a sampled decode
// runs per token, one graph launch as a greedy step is.
const stepGraph = -1

// forwardOne is Forward of one token: the step graph, then the logits
// read back. The caller holds b.mu.
func (s *Session) forwardOne(tok int) ([]float32, error) {
	b := s.b
	g, ok := s.graphs[stepGraph]
	if !ok {
		var err error
		if g, err = s.capture(1, false); err != nil {
			return nil, err
		}
		s.graphs[stepGraph] = g
	}
	s.hist0 = -1 // no greedy batch continues past an ordinary step
	if err := s.setState(s.pos, tok); err != nil {
		return nil, err
	}
	if err := b.dev.LaunchGraph(g); err != nil {
		return nil, err
	}
	rows, err := s.readLogits(1)
	if err != nil {
		return nil, err
	}
	s.pos++
	b.stats.Submits++
	b.stats.Tokens++
	return rows, nil
}

func (s *Session) check(tokens []int) error {
	if s.closed {
		return fmt.Errorf("cuda: session is closed")
	}
	if !s.b.first || !s.b.last {
		return fmt.Errorf("cuda: %s holds a part of the model's layers: run it through a Split", s.b.name)
	}
	if len(tokens) == 0 {
		return fmt.Errorf("cuda: forward of no tokens")
	}
	if s.pos+len(tokens) > s.maxLen {
		return fmt.Errorf("cuda: %d positions + %d tokens exceed the session length %d", s.pos, len(tokens), s.maxLen)
	}
	for _, t := range tokens {
		if t < 0 || t >= s.b.arch.Vocab {
			return fmt.Errorf("cuda: token %d outside the vocabulary of %d", t, s.b.arch.Vocab)
		}
	}
	return nil
}

// upload writes a chunk's token ids and the step state, then embeds them
// into x.
func (s *Session) upload(ch []int) error {
	s.hist0 = -1 // no greedy batch continues past an ordinary step
	ids := make([]int32, len(ch))
	for i, t := range ch {
		ids[i] = int32(t)
	}
	if err := s.b.dev.Upload(s.ids, driver.Bytes(ids)); err != nil {
		return err
	}
	if err := s.setState(s.pos, ch[0]); err != nil {
		return err
	}
	return s.embed(s.ids, len(ch))
}

func (s *Session) embed(ids driver.Ptr, T int) error {
	b, a := s.b, s.b.arch
	return b.launch(kernels.EmbedPrefix+b.embd.codec, &kernels.EmbedArgs{
		Out: kernels.Ptr(s.x), Table: kernels.Ptr(b.embd.ptr), IDs: kernels.Ptr(ids), T: int32(T),
		Dim: int32(a.Hidden), RowBytes: int32(b.embd.rowBytes), Scale: a.Scales().Embed})
}

// mm is y[T][rows] = x[T][cols]·Wᵀ: a matvec for one token, the batched
// matvec for a few, the tensor-core GEMM for more.
func (s *Session) mm(y driver.Ptr, w matrix, x driver.Ptr, T int) error {
	return s.mmr(y, w, x, 0, T)
}

// mmr is mm plus a repeated bias r ([biasRows][rows], or 0), added to y.
func (s *Session) mmr(y driver.Ptr, w matrix, x, r driver.Ptr, T int) error {
	return s.mmx(y, w, x, r, T, false)
}

// int8GEMM reports whether a product of T rows with w takes the int8
// tensor-core GEMM (ck_mmq_*): quantized weights the kernels have it for,
// more rows than the batched matvec takes, and not Options.Exact.
func (s *Session) int8GEMM(w matrix, T int) bool {
	return T > kernels.MaxBatch && s.xq != 0 && slices.Contains(kernels.Int8Codecs, w.codec)
}

// mmx is mmr; with reuse the caller vouches that x is unchanged since the
// product before, so an int8 rounding of it made then is used again.
func (s *Session) mmx(y driver.Ptr, w matrix, x, r driver.Ptr, T int, reuse bool) error {
	if r != 0 && T > biasRows {
		for t0 := 0; t0 < T; t0 += biasRows {
			n := min(T-t0, biasRows)
			if err := s.mmx(y+driver.Ptr(t0*w.rows*4), w, x+driver.Ptr(t0*w.cols*4), r, n, reuse); err != nil {
				return err
			}
		}
		return nil
	}
	if s.int8GEMM(w, T) {
		if err := s.quantize(x, 0, w.cols, T, reuse); err != nil {
			return err
		}
		return s.gemmq(y, w, r, T)
	}
	s.qx = 0 // the next product's reuse refers to this one, which quantized nothing
	P := func(p driver.Ptr) kernels.Ptr { return kernels.Ptr(p) }
	at := func(p driver.Ptr, off int) driver.Ptr {
		if p == 0 {
			return 0
		}
		return p + driver.Ptr(off)
	}
	switch {
	case T == 1:
		return s.b.matvec(w.codec, &kernels.MatvecArgs{Y: P(y), W: P(w.ptr), X: P(x), R: P(r),
			Rows: int32(w.rows), Cols: int32(w.cols), RowBytes: int32(w.rowBytes)})
	case T <= kernels.MaxBatch || w.codec == "f32":
		// f32 weights keep f32 activations at every size (the tensor-core
		// GEMM rounds both to f16): batched matvecs of up to MaxBatch rows.
		for t0 := 0; t0 < T; t0 += kernels.MaxBatch {
			n := min(T-t0, kernels.MaxBatch)
			if err := s.b.launch(kernels.MatvecBatchPrefix+w.codec, &kernels.MatvecBatchArgs{Y: P(y + driver.Ptr(t0*w.rows*4)),
				W: P(w.ptr), X: P(x + driver.Ptr(t0*w.cols*4)), R: P(at(r, t0*w.rows*4)), Rows: int32(w.rows), Cols: int32(w.cols),
				RowBytes: int32(w.rowBytes), N: int32(n)}); err != nil {
				return err
			}
		}
		return nil
	}
	return s.b.launch(kernels.GemmPrefix+w.codec, &kernels.GemmArgs{Y: P(y), W: P(w.ptr), X: P(x), R: P(r),
		Rows: int32(w.rows), Cols: int32(w.cols), RowBytes: int32(w.rowBytes), T: int32(T)})
}

// quantize rounds x [T][cols] (or act(x)·u when u != 0) to int8 per 32
// into xq/xds, unless reuse and they already hold exactly that.
func (s *Session) quantize(x, u driver.Ptr, cols, T int, reuse bool) error {
	if reuse && u == 0 && s.qx == x && s.qcols == cols && s.qT == T {
		return nil
	}
	s.qx = 0
	a := s.b.arch
	act := kernels.ActSiLU
	if a.Act == model.ActGELUTanh {
		act = kernels.ActGELUTanh
	}
	if err := s.b.launch(kernels.QuantQ8, &kernels.QuantQ8Args{XQ: kernels.Ptr(s.xq), XDS: kernels.Ptr(s.xds),
		X: kernels.Ptr(x), U: kernels.Ptr(u), T: int32(T), Cols: int32(cols), XStride: int32(cols), UStride: int32(cols),
		Act: act}); err != nil {
		return err
	}
	if u == 0 {
		s.qx, s.qcols, s.qT = x, cols, T
	}
	return nil
}

// gemmq is y[T][rows] = xq·Wᵀ (+r) on the int8 tensor cores, from the
// activation quantize left.
func (s *Session) gemmq(y driver.Ptr, w matrix, r driver.Ptr, T int) error {
	a := &kernels.GemmQArgs{Y: kernels.Ptr(y), W: kernels.Ptr(w.ptr), XQ: kernels.Ptr(s.xq), XDS: kernels.Ptr(s.xds),
		R: kernels.Ptr(r), Rows: int32(w.rows), Cols: int32(w.cols), RowBytes: int32(w.rowBytes), T: int32(T),
		Small: kernels.GemmQSmall(T, w.rows, s.b.dev.Info().SMs)}
	name := kernels.GemmQPrefix
	if a.Small {
		name = kernels.GemmQSmallPrefix
	}
	return s.b.launch(name+w.codec, a)
}

func (s *Session) rmsnorm(out, x, w driver.Ptr, rows, dim int) error {
	a := s.b.arch
	return s.b.launch(kernels.RMSNorm, &kernels.RMSNormArgs{Out: kernels.Ptr(out), X: kernels.Ptr(x), W: kernels.Ptr(w),
		Rows: int32(rows), Dim: int32(dim), Eps: a.NormEps, PlusOne: plusOne(a)})
}

// qkNorm normalizes q or k rows in place with the layer's q/k norm
// epsilon (adjusted for padded heads, pad.go).
func (s *Session) qkNorm(l *layer, x, w driver.Ptr, rows, dim int) error {
	return s.b.launch(kernels.RMSNorm, &kernels.RMSNormArgs{Out: kernels.Ptr(x), X: kernels.Ptr(x), W: kernels.Ptr(w),
		Rows: int32(rows), Dim: int32(dim), Eps: l.qkEps, PlusOne: l.qkPlusOne})
}

func plusOne(a *model.Arch) int32 {
	if a.Norm == model.NormRMSPlusOne {
		return 1
	}
	return 0
}

// residual adds the branch output o (post-normed when post != 0) to x and
// leaves in h the input of the next block: norm(x) with next, or x itself
// when next is 0 (a block without a pre-norm).
func (s *Session) residual(post, next driver.Ptr, T int) (driver.Ptr, error) {
	b, a := s.b, s.b.arch
	H := a.Hidden
	if post != 0 {
		if err := s.rmsnorm(s.o, s.o, post, T, H); err != nil {
			return 0, err
		}
	}
	rs := a.Scales().Residual
	if next == 0 {
		return s.x, b.launch(kernels.Add, &kernels.AddArgs{Out: kernels.Ptr(s.x), A: kernels.Ptr(s.x), B: kernels.Ptr(s.o), N: int32(T * H), BScale: rs})
	}
	return s.h, b.launch(kernels.AddRMSNorm, &kernels.AddRMSNormArgs{Resid: kernels.Ptr(s.x), Delta: kernels.Ptr(s.o),
		Out: kernels.Ptr(s.h), W: kernels.Ptr(next), Rows: int32(T), Dim: int32(H), Eps: a.NormEps, PlusOne: plusOne(a), DeltaScale: rs})
}

// layers runs every decoder layer over the T rows of x (positions from the
// device state). On return the head's input is in h, normalized (s.raw
// false), or, after a fused single-token pass, the raw residual stream in
// x, which the head's matvec normalizes itself (s.raw true).
//
// One token of a model without residual scaling or post-norms takes the
// fused path (7 launches a layer): the pre-norms ride in the matvecs
// (NormW) and the residual adds in their R input (Y = R = x).
func (s *Session) layers(T int, _ int) error {
	b, a := s.b, s.b.arch
	H := a.Hidden
	P := func(p driver.Ptr) kernels.Ptr { return kernels.Ptr(p) }
	fuse := T == 1 && a.Scales().Residual == 1 && !b.postNorms
	s.raw = fuse
	s.qx = 0
	in := s.x
	if l0 := &b.layers[0]; !fuse && l0.attnNorm != 0 {
		if err := s.rmsnorm(s.h, s.x, l0.attnNorm, T, H); err != nil {
			return err
		}
		in = s.h
	}
	act := kernels.ActSiLU
	if a.Act == model.ActGELUTanh {
		act = kernels.ActGELUTanh
	}
	for i := range b.layers {
		l := &b.layers[i]
		at := l.spec.Attn
		hd := at.HeadDim
		qd, kvd := at.Heads*hd, at.KVHeads*hd
		var norm driver.Ptr // the pre-norm the matvecs apply (fused path)
		if fuse {
			norm = l.attnNorm
		}
		// q, k, v: one matvec over the fused [q;k;v] rows for one token
		// (q|k|v contiguous), else one product each.
		qp, kp, vp := s.q, s.k, s.v
		qStride, kvStride := qd, kvd
		// A prompt without biases and q/k norms takes the fused [q;k;v] rows
		// in one product too (one grid of 3072 rows fills the device where
		// k's and v's 512 would not); rope and attention read the strided rows.
		// One token with [q;k] and a v of another codec: one ck_mvq2_ launch.
		fusedQKV := l.qkv.ptr != 0 && (T == 1 || T > kernels.MaxBatch && l.bq == 0 && at.QKNorm == model.QKNormNone)
		pairQKV := T == 1 && l.qk.ptr != 0
		if fusedQKV || pairQKV {
			kp, vp = s.q+driver.Ptr(qd*4), s.q+driver.Ptr((qd+kvd)*4)
			qStride, kvStride = qd+2*kvd, qd+2*kvd
			var err error
			if pairQKV {
				err = b.launch(kernels.MatvecPairName(l.qk.codec, l.v.codec), &kernels.MatvecPairArgs{Y: P(s.q),
					WA: P(l.qk.ptr), WB: P(l.v.ptr), X: P(in), R: P(l.bqkv), RowsA: int32(l.qk.rows), RowsB: int32(l.v.rows),
					Cols: int32(l.qk.cols), RowBytesA: int32(l.qk.rowBytes), RowBytesB: int32(l.v.rowBytes),
					NormW: P(norm), Eps: a.NormEps, PlusOne: plusOne(a)})
			} else if T == 1 {
				err = s.mv(s.q, l.qkv, in, l.bqkv, norm)
			} else {
				err = s.mm(s.q, l.qkv, in, T)
			}
			if err != nil {
				return err
			}
		} else {
			for _, p := range []struct {
				y, bias driver.Ptr
				w       matrix
			}{{qp, l.bq, l.q}, {kp, l.bk, l.k}, {vp, l.bv, l.v}} {
				var err error
				if T == 1 {
					err = s.mv(p.y, p.w, in, p.bias, norm)
				} else {
					// k and v reuse q's int8 rounding of in.
					err = s.mmx(p.y, p.w, in, p.bias, T, p.y != qp)
				}
				if err != nil {
					return err
				}
			}
		}
		switch at.QKNorm {
		case model.QKNormPerHead:
			if err := s.qkNorm(l, qp, l.qNorm, T*at.Heads, hd); err != nil {
				return err
			}
			if err := s.qkNorm(l, kp, l.kNorm, T*at.KVHeads, hd); err != nil {
				return err
			}
		case model.QKNormFull:
			if err := s.qkNorm(l, qp, l.qNorm, T, qd); err != nil {
				return err
			}
			if err := s.qkNorm(l, kp, l.kNorm, T, kvd); err != nil {
				return err
			}
		}
		// RoPE on q and k and the K/V cache write (one launch, or inside
		// the attention's), then attention.
		neox := int32(0)
		if at.Rope.Style == model.RopeNeoX {
			neox = 1
		}
		rope := &kernels.RopeKVArgs{Q: P(qp), K: P(kp), V: P(vp),
			KCache: P(s.kc[i]), VCache: P(s.vc[i]), Pos0: P(s.state), InvFreq: P(l.invFreq),
			T: int32(T), Heads: int32(at.Heads), KVHeads: int32(at.KVHeads), HeadDim: int32(hd), RotDims: int32(at.Rope.Dims),
			NeoX: neox, MScale: l.mscale, QStride: int32(qStride), KVStride: int32(kvStride), Ring: int32(s.maxLen)}
		if err := s.attention(l, i, qp, int32(qStride), T, rope); err != nil {
			return err
		}
		if fuse {
			// x += o·att; x += down·glu(norm(x)): the residual adds in
			// the matvecs.
			if err := s.mv(s.x, l.o, s.att, s.x, 0); err != nil {
				return err
			}
			if l.gate.codec == l.up.codec {
				if err := b.matvec(l.gate.codec, &kernels.MatvecArgs{Y: P(s.g), W: P(l.gate.ptr), W2: P(l.up.ptr),
					X: P(s.x), Rows: int32(l.gate.rows), Cols: int32(l.gate.cols), RowBytes: int32(l.gate.rowBytes), Act: act,
					NormW: P(l.ffnNorm), Eps: a.NormEps, PlusOne: plusOne(a)}); err != nil {
					return err
				}
			} else {
				if err := s.mv(s.g, l.gate, s.x, 0, l.ffnNorm); err != nil {
					return err
				}
				if err := s.mv(s.u, l.up, s.x, 0, l.ffnNorm); err != nil {
					return err
				}
				if err := b.launch(kernels.ActMul, &kernels.ActMulArgs{Out: P(s.g), G: P(s.g), U: P(s.u), T: 1, N: int32(l.gate.rows),
					GStride: int32(l.gate.rows), UStride: int32(l.gate.rows), Act: act}); err != nil {
					return err
				}
			}
			if err := s.mv(s.x, l.down, s.g, s.x, 0); err != nil {
				return err
			}
			continue
		}
		if err := s.mm(s.o, l.o, s.att, T); err != nil {
			return err
		}
		var err error
		if in, err = s.residual(l.postAttnNorm, l.ffnNorm, T); err != nil {
			return err
		}
		// Feed-forward: act(gate·h) * (up·h), then down.
		down := false // the int8 path ran down with the GLU's product
		if T == 1 && l.gate.codec == l.up.codec {
			if err := b.matvec(l.gate.codec, &kernels.MatvecArgs{Y: P(s.g), W: P(l.gate.ptr), W2: P(l.up.ptr),
				X: P(in), Rows: int32(l.gate.rows), Cols: int32(l.gate.cols), RowBytes: int32(l.gate.rowBytes), Act: act}); err != nil {
				return err
			}
		} else {
			if err := s.mm(s.g, l.gate, in, T); err != nil {
				return err
			}
			if err := s.mmx(s.u, l.up, in, 0, T, true); err != nil {
				return err
			}
			n := l.gate.rows
			if s.int8GEMM(l.down, T) {
				// act(g)·u goes straight to int8: the down product's input.
				if err := s.quantize(s.g, s.u, n, T, false); err != nil {
					return err
				}
				if err := s.gemmq(s.o, l.down, 0, T); err != nil {
					return err
				}
				down = true
			} else if err := b.launch(kernels.ActMul, &kernels.ActMulArgs{Out: P(s.g), G: P(s.g), U: P(s.u), T: int32(T), N: int32(n),
				GStride: int32(n), UStride: int32(n), Act: act}); err != nil {
				return err
			}
		}
		if !down {
			if err := s.mm(s.o, l.down, s.g, T); err != nil {
				return err
			}
		}
		// The next block's pre-norm is fused into the residual add: the
		// next layer's, the output norm after the last layer, none at the
		// end of a part (the next device normalizes its input itself).
		var next driver.Ptr
		switch {
		case i+1 < len(b.layers):
			next = b.layers[i+1].attnNorm
		case b.last:
			next = b.outNrm
		}
		if in, err = s.residual(l.postFF, next, T); err != nil {
			return err
		}
	}
	if !fuse && b.last && in != s.h { // the output norm always has a weight
		return fmt.Errorf("cuda: internal: no output norm")
	}
	return nil
}

// mv is one token's y = W·x (+r), x first normalized by norm when norm is
// not 0.
func (s *Session) mv(y driver.Ptr, w matrix, x, r, norm driver.Ptr) error {
	a := s.b.arch
	P := func(p driver.Ptr) kernels.Ptr { return kernels.Ptr(p) }
	return s.b.matvec(w.codec, &kernels.MatvecArgs{Y: P(y), W: P(w.ptr), X: P(x), R: P(r),
		Rows: int32(w.rows), Cols: int32(w.cols), RowBytes: int32(w.rowBytes),
		NormW: P(norm), Eps: a.NormEps, PlusOne: plusOne(a)})
}

// attention runs layer l's RoPE and K/V cache write (rope) and its
// attention for T queries at qp (rows qStride floats apart) into att:
// flash-decoding for a few tokens (one launch with the RoPE for one token
// where ck_attn_dec1_* serves the heads), else the prefill kernel (tensor
// cores for head dims 64 and 128).
func (s *Session) attention(l *layer, i int, qp driver.Ptr, qStride int32, T int, rope *kernels.RopeKVArgs) error {
	b := s.b
	at := l.spec.Attn
	hd := at.HeadDim
	P := func(p driver.Ptr) kernels.Ptr { return kernels.Ptr(p) }
	dec1 := ""
	if T <= kernels.MaxBatch && !b.opts.TwoPassDecode {
		dec1 = kernels.Decode1Name(s.kv, hd, at.Heads/at.KVHeads, s.nsplit)
	}
	var d1 *kernels.AttnDecode1Args
	if dec1 != "" {
		d1 = &kernels.AttnDecode1Args{Out: P(s.att), PartO: P(s.partO), PartML: P(s.partML),
			Done: P(s.done), Q: P(qp), KCache: P(s.kc[i]), VCache: P(s.vc[i]), Pos0: P(s.state), T: int32(T),
			Heads: int32(at.Heads), KVHeads: int32(at.KVHeads), Ring: int32(s.maxLen), Window: int32(at.Window),
			Scale: at.Scale, Softcap: at.Softcap, NSplit: s.nsplit}
		if T == 1 {
			// One token: the kernel does the RoPE and the K/V write too (q
			// rows of a fused qkv need no stride: T is 1).
			d1.KNew, d1.VNew, d1.InvFreq = rope.K, rope.V, rope.InvFreq
			d1.RotDims, d1.NeoX, d1.MScale = rope.RotDims, rope.NeoX, rope.MScale
			return b.launch(dec1, d1)
		}
	}
	if err := b.launch(kernels.RopeKVPrefix+s.kv, rope); err != nil {
		return err
	}
	if d1 != nil {
		return b.launch(dec1, d1)
	}
	if T <= kernels.MaxBatch {
		if err := b.launch(kernels.AttnDecodePrefix+s.kv, &kernels.AttnDecodeArgs{PartO: P(s.partO), PartML: P(s.partML),
			Q: P(qp), KCache: P(s.kc[i]), VCache: P(s.vc[i]), Pos0: P(s.state), T: int32(T), Heads: int32(at.Heads),
			KVHeads: int32(at.KVHeads), HeadDim: int32(hd), Ring: int32(s.maxLen), Window: int32(at.Window),
			Scale: at.Scale, Softcap: at.Softcap, NSplit: s.nsplit}); err != nil {
			return err
		}
		return b.launch(kernels.AttnCombine, &kernels.AttnCombineArgs{Out: P(s.att), PartO: P(s.partO), PartML: P(s.partML),
			T: int32(T), Heads: int32(at.Heads), HeadDim: int32(hd), NSplit: s.nsplit})
	}
	args := &kernels.AttnPrefillArgs{Out: P(s.att), Q: P(qp),
		KCache: P(s.kc[i]), VCache: P(s.vc[i]), Pos0: P(s.state), T: int32(T), Heads: int32(at.Heads),
		KVHeads: int32(at.KVHeads), HeadDim: int32(hd), Ring: int32(s.maxLen), Window: int32(at.Window),
		Scale: at.Scale, Softcap: at.Softcap, QStride: qStride}
	// f32 weights keep f32 K/V (exact); otherwise tensor cores, K/V in f16.
	if kernels.FATensorCores(hd) && !b.opts.Exact && l.q.codec != "f32" {
		return b.launch(kernels.FlashName(s.kv, hd), flashPrefill{args})
	}
	return b.launch(kernels.AttnPrefillPrefix+s.kv, args)
}

// flashPrefill launches AttnPrefillArgs as ck_flash_prefill_* with its geometry.
type flashPrefill struct{ *kernels.AttnPrefillArgs }

func (a flashPrefill) Launch() kernels.Geometry { return a.LaunchFlash() }

// head computes the logits of rows [r, r+n) into the logits buffer: from
// h, or from the raw stream in x after a fused pass (one row, the output
// norm in the matvec).
func (s *Session) head(r, n int) error {
	b, a := s.b, s.b.arch
	if s.raw {
		if err := s.mv(s.logits, b.out, s.x+driver.Ptr(r*a.Hidden*4), 0, b.outNrm); err != nil {
			return err
		}
	} else if err := s.mm(s.logits, b.out, s.h+driver.Ptr(r*a.Hidden*4), n); err != nil {
		return err
	}
	if sc := a.Scales().Logit; sc != 1 {
		return b.launch(kernels.Add, &kernels.AddArgs{Out: kernels.Ptr(s.logits), A: kernels.Ptr(s.logits),
			B: kernels.Ptr(s.logits), N: int32(n * a.Vocab), BScale: sc - 1})
	}
	return nil
}

// GreedyOnDevice is true: the whole model is on the device.
func (s *Session) GreedyOnDevice() bool { return true }

// ForwardGreedy consumes first and then k-1 greedy picks and returns the k
// picks: one CUDA graph launch of k steps (embed → layers → head → argmax,
// the argmax writing the next step's input on the device).
func (s *Session) ForwardGreedy(first, k int) ([]int, error) {
	if first < 0 {
		return nil, fmt.Errorf("cuda: greedy batch from token %d", first)
	}
	g, err := s.SubmitGreedyBatch(first, k)
	if err != nil {
		return nil, err
	}
	return s.CollectGreedyBatch(g)
}

// GreedyBatch is a submitted batch of greedy steps whose picks have not
// been collected: where they land in the device's ring of picks.
type GreedyBatch struct {
	start, k int
	first    int // the token the batch started from; -1 when it continued
}

// Steps is the number of greedy steps in the batch.
func (g *GreedyBatch) Steps() int { return g.k }

// SubmitGreedyBatch launches k greedy steps (one graph) without waiting:
// from first, or (first < 0) from the last pick of the batch before,
// which the device state already holds. The picks land in the device's
// ring; CollectGreedyBatch reads them.
func (s *Session) SubmitGreedyBatch(first, k int) (*GreedyBatch, error) {
	if k <= 0 || k > histLen/2 {
		return nil, fmt.Errorf("cuda: greedy batch of %d steps (1..%d)", k, histLen/2)
	}
	if first >= 0 {
		if err := s.check([]int{first}); err != nil {
			return nil, err
		}
	} else if s.pos == 0 || s.hist0 < 0 {
		return nil, fmt.Errorf("cuda: a greedy batch continues a batch, but none was submitted")
	}
	if s.pos+k > s.maxLen {
		return nil, fmt.Errorf("cuda: %d positions + %d greedy steps exceed the session length %d", s.pos, k, s.maxLen)
	}
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.prof != nil {
		return nil, fmt.Errorf("cuda: greedy graphs cannot be captured while profiling kernels")
	}
	g, ok := s.graphs[k]
	if !ok {
		var err error
		if g, err = s.capture(k, true); err != nil {
			return nil, err
		}
		s.graphs[k] = g
	}
	if first >= 0 {
		// A new chain: position, token, and the ring from its start.
		if err := s.setState(s.pos, first); err != nil {
			return nil, err
		}
		s.hist0 = 0
	}
	if err := b.dev.LaunchGraph(g); err != nil {
		return nil, err
	}
	batch := &GreedyBatch{start: s.hist0, k: k, first: first}
	s.hist0 += k
	s.pos += k
	b.stats.Submits++
	b.stats.Tokens += int64(k)
	return batch, nil
}

// CollectGreedyBatch waits for a batch and returns its k picks.
func (s *Session) CollectGreedyBatch(g *GreedyBatch) ([]int, error) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	ring := make([]int32, histLen)
	if err := b.dev.Read(driver.Bytes(ring), s.hist); err != nil {
		return nil, err
	}
	b.stats.ReadbackBytes += int64(4 * g.k)
	ids := make([]int, g.k)
	for i := range ids {
		p := ring[(g.start+i)%histLen]
		if p < 0 || int(p) >= b.arch.Vocab {
			return nil, fmt.Errorf("cuda: greedy step %d picked token %d (non-finite logits?)", i, p)
		}
		ids[i] = int(p)
	}
	return ids, nil
}

// DropGreedyBatch forgets the newest batch, uncollected: its positions
// are given back and the device state is the one before it (the batch
// before's last pick, or the token the dropped batch started from).
func (s *Session) DropGreedyBatch(g *GreedyBatch) error {
	if g.start+g.k != s.hist0 {
		return fmt.Errorf("cuda: only the newest greedy batch can be dropped")
	}
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	s.pos -= g.k
	s.hist0 = g.start
	st := []int32{int32(s.pos), int32(g.first), int32(g.start), 0}
	if err := b.dev.Upload(s.state, driver.Bytes(st)); err != nil {
		return err
	}
	if g.first < 0 {
		// The batch before's last pick, still in the ring.
		at := s.hist + driver.Ptr(4*((g.start-1+histLen)%histLen))
		return b.dev.Copy(s.state+4*kernels.StateToken, at, 4)
	}
	return nil
}

// capture records k one-token steps into a graph: greedy steps (each
// argmax feeding the next step's token) when argmax, else steps that leave
// their logits. The kernels are programmatic dependents where Backend.pdl
// (each waits for the one before in griddepcontrol: kernels/common.cuh).
func (s *Session) capture(k int, argmax bool) (driver.Graph, error) {
	b := s.b
	if err := b.dev.BeginCapture(); err != nil {
		return 0, err
	}
	// Every kernel of a step is a programmatic dependent of the one before
	// where the device and image allow (Backend.pdl): its launch overlaps
	// its predecessor's run (a step is ~83 dependent launches).
	b.dependent = b.pdl
	defer func() { b.dependent = false }()
	err := func() error {
		for range k {
			if err := s.embed(s.state+4*kernels.StateToken, 1); err != nil {
				return err
			}
			if err := s.layers(1, 0); err != nil {
				return err
			}
			if err := s.head(0, 1); err != nil {
				return err
			}
			if !argmax {
				continue
			}
			if err := b.launch(kernels.ArgmaxStep, &kernels.ArgmaxStepArgs{Logits: kernels.Ptr(s.logits), Vocab: int32(b.arch.Vocab),
				State: kernels.Ptr(s.state), Hist: kernels.Ptr(s.hist), HistLen: histLen}); err != nil {
				return err
			}
		}
		return nil
	}()
	g, endErr := b.dev.EndCapture()
	if err != nil {
		if endErr == nil {
			b.dev.DestroyGraph(g)
		}
		return 0, err
	}
	return g, endErr
}

// VerifyGreedy consumes tokens and returns each position's argmax, read
// back as ids rather than logits.
func (s *Session) VerifyGreedy(tokens []int) ([]int, error) {
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var picks []int
	for t0 := 0; t0 < len(tokens); t0 += s.chunk {
		ch := tokens[t0:min(len(tokens), t0+s.chunk)]
		T := len(ch)
		if err := s.upload(ch); err != nil {
			return nil, err
		}
		if err := s.layers(T, 0); err != nil {
			return nil, err
		}
		for r := 0; r < T; r += maxLogitRows {
			n := min(T-r, maxLogitRows)
			if err := s.head(r, n); err != nil {
				return nil, err
			}
			if err := b.launch(kernels.ArgmaxRows, &kernels.ArgmaxRowsArgs{IDs: kernels.Ptr(s.picks), Logits: kernels.Ptr(s.logits),
				T: int32(n), Vocab: int32(b.arch.Vocab)}); err != nil {
				return nil, err
			}
			ids := make([]int32, n)
			if err := b.dev.Read(driver.Bytes(ids), s.picks); err != nil {
				return nil, err
			}
			b.stats.ReadbackBytes += int64(4 * n)
			for _, id := range ids {
				if id < 0 || int(id) >= b.arch.Vocab {
					return nil, fmt.Errorf("cuda: verify picked token %d (non-finite logits?)", id)
				}
				picks = append(picks, int(id))
			}
		}
		s.pos += T
		b.stats.Submits++
	}
	b.stats.Tokens += int64(len(tokens))
	return picks, nil
}

// ExportState reads the KV cache back (f32, [Pos][kvDim] per layer).
func (s *Session) ExportState() (*backend.State, error) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &backend.State{Pos: s.pos, Layers: make([]backend.LayerState, len(b.layers))}
	for i, l := range b.layers {
		at, p := l.spec.Attn, b.pads[b.from+i]
		n := s.pos * at.KVHeads * at.HeadDim
		k, err := s.readKV(s.kc[i], n)
		if err != nil {
			return nil, err
		}
		v, err := s.readKV(s.vc[i], n)
		if err != nil {
			return nil, err
		}
		st.Layers[i] = backend.LayerState{K: unpadRows(k, p), V: unpadRows(v, p)}
	}
	return st, nil
}

// ImportState continues from a snapshot.
func (s *Session) ImportState(st *backend.State) error {
	b := s.b
	kv := make([]int, len(b.layers))
	zero := make([]int, len(b.layers))
	for i, l := range b.layers {
		kv[i] = l.spec.Attn.KVHeads * b.pads[b.from+i].hd
	}
	if err := st.Check(kv, zero, zero); err != nil {
		return err
	}
	if st.Pos > s.maxLen {
		return fmt.Errorf("cuda: state of %d positions for a session of %d", st.Pos, s.maxLen)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, l := range st.Layers {
		p := b.pads[b.from+i]
		if err := s.writeKV(s.kc[i], padRows(l.K, p)); err != nil {
			return err
		}
		if err := s.writeKV(s.vc[i], padRows(l.V, p)); err != nil {
			return err
		}
	}
	s.pos, s.hist0 = st.Pos, -1
	return nil
}

// unpadRows drops the padding of K or V rows ([pos][kvHeads*dev] →
// [pos][kvHeads*hd]).
func unpadRows(x []float32, p headPad) []float32 {
	if !p.padded() {
		return x
	}
	out := make([]float32, 0, len(x)/p.dev*p.hd)
	for h := 0; h < len(x); h += p.dev {
		out = append(out, x[h:h+p.hd]...)
	}
	return out
}

// padRows is unpadRows' inverse.
func padRows(x []float32, p headPad) []float32 {
	if !p.padded() {
		return x
	}
	out := make([]float32, len(x)/p.hd*p.dev)
	for h, o := 0, 0; h < len(x); h, o = h+p.hd, o+p.dev {
		copy(out[o:], x[h:h+p.hd])
	}
	return out
}

// readKV reads n cache elements as f32.
func (s *Session) readKV(p driver.Ptr, n int) ([]float32, error) {
	out := make([]float32, n)
	if s.kv == "f32" {
		return out, s.b.dev.Read(driver.Bytes(out), p)
	}
	h := make([]uint16, n)
	if err := s.b.dev.Read(driver.Bytes(h), p); err != nil {
		return nil, err
	}
	for i, x := range h {
		out[i] = tensor.F16ToF32(x)
	}
	return out, nil
}

// writeKV writes f32 values into the cache in its element.
func (s *Session) writeKV(p driver.Ptr, x []float32) error {
	if s.kv == "f32" {
		return s.b.dev.Upload(p, driver.Bytes(x))
	}
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = tensor.F32ToF16(v)
	}
	return s.b.dev.Upload(p, driver.Bytes(h))
}

var (
	_ backend.Session        = (*Session)(nil)
	_ backend.Rewinder       = (*Session)(nil)
	_ backend.GreedyVerifier = (*Session)(nil)
	_ backend.StateExporter  = (*Session)(nil)
	_ backend.StateImporter  = (*Session)(nil)
)

package device

import (
	"fmt"
	"math"
	"sync"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// DiTRunner runs the Z-Image transformer's blocks and final layer on the
// device (diffusion.DiTDevice): the weights uploaded once, each
// evaluation one upload of the embedded rows, RoPE rows and modulation
// vectors, every block in one submission, one readback of the final
// layer's output. The embedders and the timestep MLP stay on the CPU
// (diffusion.DiT.Prepare).
//
// The linear layers are the LLM prefill's tiled GEMM (shaders.Gemm, any
// of f32, f16, q8_0, q4_0), the feed-forward's gate and up projections one
// GEMM over their interleaved rows with SiLU(gate)·up in its epilogue, the
// joint attention the tiled kernel (shaders.AttentionTiled). Every buffer
// bound stays within the binding limit (the device's, or
// DiTOptions.MaxBinding): matrices larger than it are stored as bands of
// rows, one GEMM each, and the feed-forward's hidden activations (FFN wide,
// the widest) are computed in chunks of rows; every output value is
// computed the same way whatever the bands and chunks, so the results do
// not depend on the limit.
//
// The first evaluation of a batch layout allocates its activations and
// records its dispatches; the next steps of that layout write their inputs
// and submit the same dispatches. Trim (called when a generation ends)
// releases them.
type DiTRunner struct {
	d   *gpu.Device
	s   *diffusion.DiTSpec
	wts map[*float32]*gpu.Buffer
	// The blocks' matrices (refiners, layers) and the final layer's; s
	// keeps the spec's sizes and vectors, not its matrices (the host's
	// float32 copies are the caller's to drop).
	noise, ctx, layers []blockMats
	final              *matrix
	byKey              map[*float32]*matrix // while uploading: matrices by their spec array
	bufs               []*gpu.Buffer
	// ffn is the feed-forward width on the device: FFN rounded up to a
	// multiple of 4 (the GEMM reads rows as vec4), the padding zeros.
	ffn int
	// batchLimit is the most bytes of a batch's stream buffers; limit the
	// most bytes of any binding (weight bands, feed-forward chunks).
	batchLimit, limit uint64
	// dispatches is the last submission's dispatch count.
	dispatches int
	gemm       shaders.GemmTiling // zero: shaders.Gemm's
	attnSplit  int
	recs       map[string]*ditRun // recorded evaluations by batch layout
	mu         sync.Mutex         // run, Trim and Close: recs
}

// matrix is an [out, in] weight on the device as bands of rows, each one
// binding within the limit.
type matrix struct {
	codec   tensor.Codec
	out, in int
	bands   []band
}

// blockMats are one block's matrices on the device.
type blockMats struct{ q, k, v, o, w13, w2 *matrix }

// band is rows [row0, row0+rows) of a matrix in its own buffer (its bias
// rows in another, nil without a bias).
type band struct {
	buf, bias  *gpu.Buffer
	row0, rows int
	soff       uint32 // q8_0/q4_0: the scale plane's offset in u32
}

// DiTOptions tunes NewDiTRunner.
type DiTOptions struct {
	// Codec stores the blocks' matrices whose rows are whole blocks as
	// f16, q8_0 or q4_0 on the device (zero: f32), a quarter to an eighth
	// of the f32 bytes; activations stay f32.
	Codec tensor.Codec
	// BatchBytes caps the stream buffers of a batch (RunBatch) below the
	// device's binding limit (0: that limit); a larger batch runs one
	// submission per input.
	BatchBytes uint64
	// MaxBinding caps every binding below the device's limit (0: that
	// limit): the weight bands and the feed-forward's row chunks. A test
	// forces a small one to run the browser's tiling on a native device.
	MaxBinding uint64
	// Gemm is the linear layers' GEMM tiling (zero: shaders.Gemm's, the
	// LLM prefill's; shaders.GemmLarge is the other one tuned).
	Gemm shaders.GemmTiling
	// AttnSplit is the tiled attention's threads per query row (0:
	// shaders.AttentionTiledSplit's choice for the head dimension).
	AttnSplit int
}

// DiTBindings lists the buffers a DiTRunner binds for an evaluation of
// rows stream rows (image and caption rows of every input of a batch),
// by name, in bytes, before any banding or chunking: what a binding limit
// must hold or the runner splits.
func DiTBindings(s *diffusion.DiTSpec, rows int, c tensor.Codec) map[string]uint64 {
	D, F := uint64(s.Dim), uint64((s.FFN+3)&^3)
	n := uint64(rows)
	mat := func(out, in uint64) uint64 {
		cc := c
		if in%32 != 0 {
			cc = tensor.F32
		}
		b, _ := tensor.ByteLen(cc, []int{int(out), int(in)})
		return uint64(b)
	}
	return map[string]uint64{
		"stream (u, h, q, k, v, att, a, hn, f: rows x dim f32 each)": 4 * n * D,
		"ffn hidden (rows x ffn f32)":                                4 * n * F,
		"q/k/v/o weight (dim x dim)":                                 mat(D, D),
		"w1/w3 fused weight (2 ffn x dim)":                           mat(2*F, D),
		"w2 weight (dim x ffn)":                                      mat(D, F),
		"rope (rows x head dim f32)":                                 4 * n * uint64(s.HeadDim),
	}
}

// NewDiTRunner uploads the blocks' weights.
func NewDiTRunner(d *gpu.Device, s *diffusion.DiTSpec, opts DiTOptions) (*DiTRunner, error) {
	if s.HeadDim > 1024 || s.HeadDim%2 != 0 {
		return nil, fmt.Errorf("webgpu: dit: head dimension %d (the kernels take even sizes up to 1024)", s.HeadDim)
	}
	if s.Dim%4 != 0 {
		return nil, fmt.Errorf("webgpu: dit: width %d (the kernels take multiples of 4)", s.Dim)
	}
	switch opts.Codec {
	case tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0:
	default:
		return nil, fmt.Errorf("webgpu: dit: weights as %s (f32, f16, q8_0 or q4_0)", opts.Codec)
	}
	split := opts.AttnSplit
	if split == 0 {
		split = shaders.AttentionTiledSplit(s.HeadDim)
	}
	if s.HeadDim%4 == 0 && s.HeadDim <= 256 {
		if _, err := shaders.AttentionTiledSplitSrc(s.HeadDim, split); err != nil {
			return nil, fmt.Errorf("webgpu: dit: %w", err)
		}
	}
	if opts.Gemm != (shaders.GemmTiling{}) {
		if err := opts.Gemm.Check(); err != nil {
			return nil, fmt.Errorf("webgpu: dit: %w", err)
		}
	}
	lim := bindingLimit(d, opts.MaxBinding)
	r := &DiTRunner{d: d, s: s, wts: map[*float32]*gpu.Buffer{}, byKey: map[*float32]*matrix{},
		ffn: (s.FFN + 3) &^ 3, limit: lim, gemm: opts.Gemm, attnSplit: split, batchLimit: bindingLimit(d, min(lim, nonZero(opts.BatchBytes)))}
	D, F, FP := s.Dim, s.FFN, r.ffn
	var xs [][]float32
	fail := func(err error) (*DiTRunner, error) {
		r.Close()
		return nil, fmt.Errorf("webgpu: dit: %w", err)
	}
	for _, g := range []struct {
		bs  []diffusion.BlockSpec
		dst *[]blockMats
	}{{s.NoiseRefiner, &r.noise}, {s.ContextRefiner, &r.ctx}, {s.Layers, &r.layers}} {
		for _, b := range g.bs {
			xs = append(xs, b.QNorm, b.KNorm, b.AttnNorm1, b.AttnNorm2, b.FFNNorm1, b.FFNNorm2)
			var bm blockMats
			for i, w := range [][]float32{b.Q, b.K, b.V, b.O} {
				m, err := r.upload(w, D, D, opts.Codec, nil, func(i int, dst []float32) { copy(dst, w[i*D:(i+1)*D]) })
				if err != nil {
					return fail(err)
				}
				*[]**matrix{&bm.q, &bm.k, &bm.v, &bm.o}[i] = m
			}
			// W1 and W3 interleaved: row 2i is W1's row i, 2i+1 W3's
			// (zeros past FFN).
			w1, w3 := b.W1, b.W3
			var err error
			if bm.w13, err = r.upload(w1, 2*FP, D, opts.Codec, nil, func(i int, dst []float32) {
				src := w1
				if i%2 == 1 {
					src = w3
				}
				if i/2 >= F {
					clear(dst)
					return
				}
				copy(dst, src[i/2*D:(i/2+1)*D])
			}); err != nil {
				return fail(err)
			}
			w2 := b.W2
			if bm.w2, err = r.upload(w2, D, FP, opts.Codec, nil, func(i int, dst []float32) {
				copy(dst, w2[i*F:(i+1)*F])
				clear(dst[F:])
			}); err != nil {
				return fail(err)
			}
			*g.dst = append(*g.dst, bm)
		}
	}
	fw := s.FinalW
	var err error
	if r.final, err = r.upload(fw, s.PatchDim, D, tensor.F32, s.FinalB, func(i int, dst []float32) { copy(dst, fw[i*D:(i+1)*D]) }); err != nil {
		return fail(err)
	}
	r.byKey = nil
	// Keep the sizes and the vectors, not the matrices.
	ts := *s
	ts.FinalW, ts.FinalB = nil, nil
	for _, bs := range []*[]diffusion.BlockSpec{&ts.NoiseRefiner, &ts.ContextRefiner, &ts.Layers} {
		c := make([]diffusion.BlockSpec, len(*bs))
		for i, b := range *bs {
			b.Q, b.K, b.V, b.O, b.W1, b.W3, b.W2 = nil, nil, nil, nil, nil, nil, nil
			c[i] = b
		}
		*bs = c
	}
	r.s = &ts
	if err := uploadWeights(d, r.wts, &r.bufs, xs...); err != nil {
		return fail(err)
	}
	if err := d.Flush(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// nonZero is x, or the largest uint64 for 0 (no cap).
func nonZero(x uint64) uint64 {
	if x == 0 {
		return ^uint64(0)
	}
	return x
}

// upload stores an [out, in] matrix (row i written into dst by row) in
// codec c (f32 where in is not a multiple of 32) as bands of rows within
// the binding limit, keyed by key's first element; a matrix already
// uploaded under that key (blocks sharing weights) is not uploaded again.
func (r *DiTRunner) upload(key []float32, out, in int, c tensor.Codec, bias []float32, row func(i int, dst []float32)) (*matrix, error) {
	if m := r.byKey[&key[0]]; m != nil {
		return m, nil
	}
	if in%32 != 0 {
		c = tensor.F32
	}
	rowBytes, err := tensor.ByteLen(c, []int{1, in})
	if err != nil {
		return nil, err
	}
	per := bandRows(r.limit, uint64(rowBytes))
	if per < 1 {
		return nil, fmt.Errorf("a %d-byte row of a %dx%d matrix exceeds the binding limit %d", rowBytes, out, in, r.limit)
	}
	m := &matrix{codec: c, out: out, in: in}
	f := make([]float32, min(per, out)*in)
	for r0 := 0; r0 < out; r0 += per {
		n := min(per, out-r0)
		x := f[:n*in]
		for i := range n {
			row(r0+i, x[i*in:(i+1)*in])
		}
		var enc []byte
		var soff uint32
		if c == tensor.F32 {
			enc = gpu.F32Bytes(x)
		} else {
			bl, err := tensor.ByteLen(c, []int{n, in})
			if err != nil {
				return nil, err
			}
			enc = make([]byte, bl)
			if err := tensor.Quantize(enc, c, x); err != nil {
				return nil, err
			}
			if dc := shaders.DeviceCodecOf(c); dc != nil && dc.Pack != nil {
				if enc, soff, err = dc.Pack(nil, enc); err != nil {
					return nil, err
				}
			}
		}
		size := (len(enc) + 15) &^ 15
		b, err := r.d.NewStorage("dit.weight", uint64(size))
		if err != nil {
			return nil, err
		}
		r.bufs = append(r.bufs, b)
		if err := r.d.Write(b, 0, append(enc, make([]byte, size-len(enc))...)); err != nil {
			return nil, err
		}
		bd := band{buf: b, row0: r0, rows: n, soff: soff}
		if len(bias) > 0 {
			bb, err := r.d.NewStorage("dit.bias", uint64(max(4*n, 16)))
			if err != nil {
				return nil, err
			}
			r.bufs = append(r.bufs, bb)
			if err := r.d.Write(bb, 0, gpu.F32Bytes(bias[r0:r0+n])); err != nil {
				return nil, err
			}
			bd.bias = bb
		}
		m.bands = append(m.bands, bd)
	}
	r.byKey[&key[0]] = m
	return m, nil
}

// bandRows is how many rows of rowBytes bytes a band within limit holds:
// a multiple of 64 (the GEMM's tile) where the limit allows, else even
// (fused gate/up pairs stay together); 64 bytes are kept for the device
// layout's padding (16 bytes a band, a planar codec's scale plane a word).
func bandRows(limit, rowBytes uint64) int {
	if limit < 64 {
		return 0
	}
	per := int((limit - 64) / rowBytes)
	if per >= 64 {
		return per &^ 63
	}
	return per &^ 1
}

// ffnChunk is how many stream rows of the feed-forward's hidden
// activations (ffn f32 each) one binding within limit holds, at most rows.
func ffnChunk(limit uint64, ffn, rows int) int {
	return min(rows, max(1, int(limit/uint64(4*ffn))))
}

// Close releases the device buffers.
func (r *DiTRunner) Close() {
	r.Trim()
	for _, b := range r.bufs {
		b.Release()
	}
	r.bufs = nil
}

// ditRun is one evaluation's buffers: the stream u [n, dim] (image rows,
// then caption rows) and scratch of the same row layout; g holds the
// feed-forward's hidden rows of one chunk (chunk rows x ffn).
type ditRun struct {
	imgRun
	s                     *diffusion.DiTSpec
	u, h, q, k, v, att, a *gpu.Buffer
	hn, g, f              *gpu.Buffer
	rope, mod, finalScale *gpu.Buffer
	out                   *gpu.Buffer // the final layer's rows [outRows, patch dim]
	rows, ffn, chunk      int
	outRows               int
	steps                 map[[2]int]*gpu.Buffer
	gemmTiling            shaders.GemmTiling
	attnSplit             int
}

// step is the GEMM's row selection: rows [row0, row0+rows) of x (the
// matmul interface's step buffer under sel 1).
func (r *ditRun) step(row0, rows int) *gpu.Buffer {
	k := [2]int{row0, rows}
	if b := r.steps[k]; b != nil {
		return b
	}
	if r.err != nil {
		return nil
	}
	b, err := r.d.NewStorage("img.step", 16)
	if err != nil {
		r.err = err
		return nil
	}
	r.temps = append(r.temps, b)
	if r.err = r.d.Write(b, 0, gpu.U32Bytes([]uint32{0, u32(rows), u32(row0), u32(rows)})); r.err == nil {
		r.steps[k] = b
	}
	return b
}

// gemm queues (labelled img/gemm/label) y[yOff + t·yStride + o] = Σ_i W[o, i]·x[row0 + t, i] (+ bias)
// for t < rows over every band of m (mode 2: the rows are interleaved
// gate/up pairs, output o/2 = SiLU(gate)·up).
func (r *ditRun) gemm(label string, m *matrix, x *gpu.Buffer, row0, rows int, y *gpu.Buffer, yOff, yStride int, mode uint32) {
	if r.err != nil {
		return
	}
	key := "img/gemm-gated/" + m.codec.String()
	gen := func() (string, error) { return shaders.GemmGated(m.codec, shaders.GemmTiling{}) }
	tr, tt := shaders.GemmTile(m.codec)
	if g := r.gemmTiling; g != (shaders.GemmTiling{}) {
		key += fmt.Sprintf("/%dx%dx%d/%dx%d", g.Rows, g.Tokens, g.K, g.ThreadRows, g.ThreadTokens)
		gen = func() (string, error) { return shaders.GemmGated(m.codec, g) }
		tr, tt = g.Rows, g.Tokens
	}
	p, err := r.d.PipelineOf(key, gen, kinds(shaders.KMatmul))
	if err != nil {
		r.err = err
		return
	}
	st := r.step(row0, rows)
	for _, b := range m.bands {
		off := b.row0
		if mode == 2 {
			off /= 2
		}
		bias := b.bias
		if bias == nil {
			bias = r.dummy()
		}
		u := r.uniform(shaders.MatmulParams{Rows: u32(b.rows), Cols: u32(m.in), SOff: b.soff, Mode: mode, Alpha: 1, Sel: 1,
			HasBias: flag(b.bias != nil), OutStride: u32(yStride), OutOff: u32(yOff + off)})
		g := (b.rows + tr - 1) / tr
		r.queue(p, key, "img/gemm/"+label, uint32(min(g, 65535)), uint32((g+65534)/65535), uint32((rows+tt-1)/tt), u, st, b.buf, x, y, bias)
	}
}

// queue binds bufs to pipeline p (its bind group key) and queues it on a
// (x, y, z) grid under label.
func (r *ditRun) queue(p *gpu.Pipeline, key, label string, gx, gy, gz uint32, bufs ...*gpu.Buffer) {
	if r.err != nil {
		return
	}
	bs := make([]gpu.Binding, len(bufs))
	for i, b := range bufs {
		bs[i] = gpu.Whole(b)
	}
	g, err := r.d.BindGroup(p, key, bs...)
	if err != nil {
		r.err = err
		return
	}
	r.groups = append(r.groups, g)
	r.ds = append(r.ds, gpu.Dispatch{P: p, G: g, X: gx, Y: gy, Z: gz, Label: label})
}

// norm writes rows of x normalized (mode 0 RMS, 1 LayerNorm) into y, times
// w and the modulation vector at scaleOff (< 0: none).
func (r *ditRun) norm(x *gpu.Buffer, w []float32, scaleOff, mode, row0, rows int, eps float32, y *gpu.Buffer) {
	scale := r.mod
	if scaleOff == -2 {
		scale, scaleOff = r.finalScale, 0
	}
	gx, gy := uint32(min(rows, 65535)), uint32((rows+65534)/65535)
	r.dispatch(shaders.RowsNorm, gx, gy, 1,
		r.uniform(shaders.RowsNormParams{Width: u32(r.s.Dim), Row0: u32(row0), Rows: u32(rows), Mode: u32(mode), Eps: eps, HasW: flag(len(w) > 0),
			HasScale: flag(scaleOff >= 0), ScaleOff: u32(max(scaleOff, 0))}), x, r.w(w), scale, y)
}

// normAdd adds the normed rows of x (times w) to u's, gated by the
// modulation vector at gateOff (< 0: ungated); with next, it then writes
// u's rows normed (times w2 and the modulation vector at scaleOff, < 0:
// none) into h.
func (r *ditRun) normAdd(x *gpu.Buffer, w []float32, gateOff int, next bool, w2 []float32, scaleOff, row0, rows int) {
	gx, gy := uint32(min(rows, 65535)), uint32((rows+65534)/65535)
	y := r.h
	if !next {
		y = r.hn // not written
	}
	r.dispatch(shaders.NormAdd, gx, gy, 1,
		r.uniform(shaders.NormAddParams{Width: u32(r.s.Dim), Row0: u32(row0), Rows: u32(rows), Eps: r.s.Eps, Eps2: r.s.Eps,
			HasW: flag(len(w) > 0), HasGate: flag(gateOff >= 0), GateOff: u32(max(gateOff, 0)),
			HasNext: flag(next), HasW2: flag(len(w2) > 0), HasScale: flag(scaleOff >= 0), ScaleOff: u32(max(scaleOff, 0))}),
		x, r.w(w), r.mod, r.w(w2), r.u, y)
}

// attention queues the joint attention of every head over rows
// [row0, row0+rows) of q, k, v into att: the tiled kernel where the head
// dimension allows, else one workgroup per query row.
func (r *ditRun) attention(row0, rows int) {
	s := r.s
	par := r.uniform(shaders.AttentionFullParams{N: u32(rows), D: u32(s.HeadDim), Scale: float32(1 / math.Sqrt(float64(s.HeadDim))), Stride: u32(s.Dim), Row0: u32(row0)})
	if s.HeadDim%4 != 0 || s.HeadDim > 256 {
		r.dispatch(shaders.AttentionFull, uint32(min(rows, 65535)), uint32((rows+65534)/65535), uint32(s.Heads), par, r.q, r.k, r.v, r.att)
		return
	}
	if r.err != nil {
		return
	}
	key := fmt.Sprintf("img/%s/hd%d/s%d", shaders.AttentionTiled, s.HeadDim, r.attnSplit)
	p, err := r.d.PipelineOf(key, func() (string, error) { return shaders.AttentionTiledSplitSrc(s.HeadDim, r.attnSplit) }, kinds(shaders.AttentionTiled))
	if err != nil {
		r.err = err
		return
	}
	bq := shaders.AttentionTiledRows
	r.queue(p, key, "img/"+shaders.AttentionTiled, uint32((rows+bq-1)/bq), 1, uint32(s.Heads), par, r.q, r.k, r.v, r.att)
}

// seg is one sequence's rows [row0, row0+rows) of u: attention runs
// within it.
type seg struct{ row0, rows int }

// block runs one transformer block on rows [row0, row0+rows) of u, the
// attention within each of segs (which cover them); m is its modulation
// vector's index (< 0: unmodulated).
func (r *ditRun) block(b *diffusion.BlockSpec, bm blockMats, m, row0, rows int, segs ...seg) {
	s := r.s
	D := s.Dim
	off := func(k int) int {
		if m < 0 {
			return -1
		}
		return (4*m + k) * D
	}
	r.norm(r.u, b.AttnNorm1, off(0), 0, row0, rows, s.Eps, r.h)
	r.gemm("q", bm.q, r.h, row0, rows, r.q, row0*D, D, 0)
	r.gemm("k", bm.k, r.h, row0, rows, r.k, row0*D, D, 0)
	r.gemm("v", bm.v, r.h, row0, rows, r.v, row0*D, D, 0)
	for _, x := range []struct {
		buf *gpu.Buffer
		nw  []float32
	}{{r.q, b.QNorm}, {r.k, b.KNorm}} {
		gx, gy := grid(rows*s.Heads, 64)
		r.dispatch(shaders.QKRope, gx, gy, 1,
			r.uniform(shaders.QKRopeParams{Heads: u32(s.Heads), HD: u32(s.HeadDim), Row0: u32(row0), Rows: u32(rows), Eps: s.QKEps, HasNorm: flag(len(x.nw) > 0), Width: u32(D)}), r.w(x.nw), r.rope, x.buf)
	}
	if len(segs) == 0 {
		segs = []seg{{row0, rows}}
	}
	for _, sg := range segs {
		r.attention(sg.row0, sg.rows)
	}
	r.gemm("o", bm.o, r.att, row0, rows, r.a, row0*D, D, 0)
	// u += gate·norm(a), then h = the feed-forward's modulated norm of u.
	r.normAdd(r.a, b.AttnNorm2, off(1), true, b.FFNNorm1, off(2), row0, rows)

	// The feed-forward in chunks of rows: g = SiLU(h·W1ᵀ)⊙(h·W3ᵀ) for the
	// chunk's rows, then f = g·W2ᵀ into the chunk's rows of f.
	for c0 := row0; c0 < row0+rows; c0 += r.chunk {
		n := min(r.chunk, row0+rows-c0)
		r.gemm("w1w3", bm.w13, r.h, c0, n, r.g, 0, r.ffn, 2)
		r.gemm("w2", bm.w2, r.g, 0, n, r.f, c0*D, D, 0)
	}
	r.normAdd(r.f, b.FFNNorm2, off(3), false, nil, -1, row0, rows)
}

// Run implements diffusion.DiTDevice.
func (d *DiTRunner) Run(in *diffusion.DiTInput) ([]float32, error) {
	ys, err := d.run([]*diffusion.DiTInput{in})
	if err != nil {
		return nil, err
	}
	return ys[0], nil
}

// RunBatch implements diffusion.DiTBatchDevice: the inputs (one timestep,
// so one set of modulation vectors) as one stream [image₁, caption₁,
// image₂, caption₂, …] in one submission. The refiners run per input (an
// input's image rows and caption rows are apart), the layers' row-wise
// kernels over all rows at once and their attention within each input:
// every value is computed as in Run, so each output is Run's bit for bit.
// A batch whose stream buffers would exceed the device's binding limit
// (or DiTOptions.BatchBytes) runs as one submission per input.
func (d *DiTRunner) RunBatch(ins []*diffusion.DiTInput) ([][]float32, error) {
	N := 0
	for _, in := range ins {
		N += in.ImgRows + in.CapRows
	}
	if len(ins) > 1 && uint64(4*N*d.s.Dim) > d.batchLimit {
		ys := make([][]float32, len(ins))
		for i, in := range ins {
			y, err := d.Run(in)
			if err != nil {
				return nil, err
			}
			ys[i] = y
		}
		return ys, nil
	}
	return d.run(ins)
}

func (d *DiTRunner) run(ins []*diffusion.DiTInput) ([][]float32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.s
	D := s.Dim
	if len(ins) == 0 {
		return nil, fmt.Errorf("webgpu: dit: an empty batch")
	}
	base := make([]int, len(ins)) // each input's first row in the stream
	N := 0
	for i, in := range ins {
		if len(in.Img) != in.ImgRows*D || len(in.Cap) != in.CapRows*D || len(in.NoiseMod) != len(s.NoiseRefiner) || len(in.LayerMod) != len(s.Layers) {
			return nil, fmt.Errorf("webgpu: dit: input does not match the model")
		}
		if i > 0 && !sameMods(in, ins[0]) {
			return nil, fmt.Errorf("webgpu: dit: batch input %d has other modulation vectors (another timestep) than input 0", i)
		}
		base[i] = N
		N += in.ImgRows + in.CapRows
	}
	key := ""
	for _, in := range ins {
		key += fmt.Sprintf("%d/%d/%d,", in.ImgRows, in.NImg, in.CapRows)
	}
	r, err := d.recorded(key, ins, base, N)
	if err != nil {
		return nil, err
	}
	var u, rope []float32
	for _, in := range ins {
		u = append(append(u, in.Img...), in.Cap...)
		rope = append(append(rope, in.ImgRope...), in.CapRope...)
	}
	var mods []float32
	for _, m := range ins[0].NoiseMod {
		mods = append(mods, m...)
	}
	for _, m := range ins[0].LayerMod {
		mods = append(mods, m...)
	}
	for _, w := range []struct {
		b *gpu.Buffer
		x []float32
	}{{r.u, u}, {r.rope, rope}, {r.mod, mods}, {r.finalScale, ins[0].FinalScale}} {
		if len(w.x) > 0 {
			if err := d.d.Write(w.b, 0, gpu.F32Bytes(w.x)); err != nil {
				return nil, fmt.Errorf("webgpu: dit: %w", err)
			}
		}
	}
	d.dispatches = len(r.ds)
	if err := d.d.Run(nil, r.ds, nil); err != nil {
		return nil, fmt.Errorf("webgpu: dit: %w", err)
	}
	out, outRows := r.out, r.outRows
	raw, err := d.d.ReadBuffer(out, uint64(4*outRows*s.PatchDim))
	if err != nil {
		return nil, fmt.Errorf("webgpu: dit: %w", err)
	}
	all := gpu.BytesF32(raw)
	ys := make([][]float32, len(ins))
	for i, in := range ins {
		ys[i] = all[base[i]*s.PatchDim : (base[i]+in.NImg)*s.PatchDim]
	}
	return ys, nil
}

// recorded is the evaluation of a batch layout (key: each input's image,
// patch and caption rows) with its buffers allocated and every dispatch
// recorded, kept for the next steps (the layout repeats every step; a
// guidance batch run per input alternates two): a step then writes its
// inputs and submits. At most two are kept.
func (d *DiTRunner) recorded(key string, ins []*diffusion.DiTInput, base []int, N int) (*ditRun, error) {
	if r := d.recs[key]; r != nil {
		return r, nil
	}
	if len(d.recs) >= 2 {
		d.dropRecorded()
	}
	s := d.s
	D := s.Dim
	// The feed-forward's chunk: as many rows as its hidden activations
	// fit in a binding.
	chunk := ffnChunk(d.limit, d.ffn, N)
	r := &ditRun{imgRun: imgRun{d: d.d, wts: d.wts}, s: s, rows: N, ffn: d.ffn, chunk: chunk, steps: map[[2]int]*gpu.Buffer{}, gemmTiling: d.gemm, attnSplit: d.attnSplit}
	r.u = r.buf(N * D)
	r.rope = r.buf(N * s.HeadDim)
	r.mod = r.buf(4 * D * (len(s.NoiseRefiner) + len(s.Layers)))
	r.finalScale = r.buf(D)
	for _, p := range []**gpu.Buffer{&r.h, &r.q, &r.k, &r.v, &r.att, &r.a, &r.hn, &r.f} {
		*p = r.buf(N * D)
	}
	r.g = r.buf(chunk * d.ffn)
	last := len(ins) - 1
	r.outRows = base[last] + ins[last].NImg
	r.out = r.buf(r.outRows * s.PatchDim)

	for j := range s.NoiseRefiner {
		for i, in := range ins {
			r.block(&s.NoiseRefiner[j], d.noise[j], j, base[i], in.ImgRows)
		}
	}
	for j := range s.ContextRefiner {
		for i, in := range ins {
			r.block(&s.ContextRefiner[j], d.ctx[j], -1, base[i]+in.ImgRows, in.CapRows)
		}
	}
	segs := make([]seg, len(ins))
	for i, in := range ins {
		segs[i] = seg{base[i], in.ImgRows + in.CapRows}
	}
	for j := range s.Layers {
		r.block(&s.Layers[j], d.layers[j], len(s.NoiseRefiner)+j, 0, N, segs...)
	}
	for i, in := range ins {
		r.norm(r.u, nil, -2, 1, base[i], in.NImg, s.FinalEps, r.h)
		r.gemm("final", d.final, r.h, base[i], in.NImg, r.out, base[i]*s.PatchDim, s.PatchDim, 0)
	}
	if r.err != nil {
		r.release()
		return nil, fmt.Errorf("webgpu: dit: %w", r.err)
	}
	if d.recs == nil {
		d.recs = map[string]*ditRun{}
	}
	d.recs[key] = r
	return r, nil
}

// Trim implements diffusion.DiTTrimmer: it releases the evaluations kept
// for the next step (a generation's activations on the device).
func (d *DiTRunner) Trim() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropRecorded()
}

// dropRecorded releases the recorded evaluations.
func (d *DiTRunner) dropRecorded() {
	for k, r := range d.recs {
		r.release()
		delete(d.recs, k)
	}
}

// sameMods reports whether a and b carry the same modulation vectors.
func sameMods(a, b *diffusion.DiTInput) bool {
	eq := func(x, y []float32) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
		return true
	}
	if len(a.NoiseMod) != len(b.NoiseMod) || len(a.LayerMod) != len(b.LayerMod) || !eq(a.FinalScale, b.FinalScale) {
		return false
	}
	for i := range a.NoiseMod {
		if !eq(a.NoiseMod[i], b.NoiseMod[i]) {
			return false
		}
	}
	for i := range a.LayerMod {
		if !eq(a.LayerMod[i], b.LayerMod[i]) {
			return false
		}
	}
	return true
}

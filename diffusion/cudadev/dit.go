package cudadev

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/cuda/kernels"
	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/tensor"
)

// DiTOptions tunes NewDiTRunner.
type DiTOptions struct {
	// Module is the kernel image to load (nil: kernels.Image, every ck_*
	// kernel); a cubin of dit.cu for the device is quicker to load.
	Module []byte
	// NoGraph launches a step's kernels one by one instead of replaying
	// the step captured as a CUDA graph.
	NoGraph bool
}

// DiTRunner runs the Z-Image transformer's blocks and final layer on a
// CUDA device (diffusion.DiTDevice): the weights uploaded once as f16,
// each evaluation one upload of the embedded rows, RoPE rows and
// modulation vectors, the whole evaluation one CUDA graph launch, one
// readback of the final layer's output. The embedders and the timestep
// MLP stay on the CPU (diffusion.DiT.Prepare).
//
// Every linear layer is one tensor-core GEMM (ck_dit_gemm_*): q, k and v
// one product over their stacked rows, the feed-forward's gate and up one
// product over their interleaved rows with SiLU(gate)·up in its epilogue.
// Activations into products are f16, accumulation f32, the residual
// stream f32 (see package doc for the precision).
type DiTRunner struct {
	dev    driver.Device
	mod    driver.Module
	fns    map[string]driver.Func
	s      *diffusion.DiTSpec // sizes and vectors, no matrices
	noise  []blockW
	ctx    []blockW
	layers []blockW
	finalW driver.Ptr // [PatchDim][Dim] f16
	finalB driver.Ptr // [PatchDim] f32
	vecs   map[*float32]driver.Ptr
	mats   map[*float32]driver.Ptr
	allocs []driver.Ptr
	ffn    int // FFN rounded up to a multiple of the GEMM's K tile
	attn   string
	graph  bool
	// WeightBytes is the bytes of weights on the device.
	WeightBytes int64
	recs        map[string]*ditRun
	mu          sync.Mutex
}

// blockW are one block's weights on the device: qkv [3·dim][dim], o
// [dim][dim], w13 [2·ffn][dim] (row 2i W1's row i, 2i+1 W3's), w2
// [dim][ffn], f16; the norm weights f32 (0: absent).
type blockW struct {
	qkv, o, w13, w2            driver.Ptr
	qn, kn, an1, an2, fn1, fn2 driver.Ptr
}

// NewDiTRunner uploads the blocks' weights to dev (which the runner uses
// but does not close).
func NewDiTRunner(dev driver.Device, s *diffusion.DiTSpec, opts DiTOptions) (*DiTRunner, error) {
	D := s.Dim
	attn, err := kernels.DiTAttnName(s.HeadDim)
	switch {
	case err != nil:
		return nil, fmt.Errorf("cuda: dit: %w", err)
	case D%kernels.DiTGemmBK != 0:
		return nil, fmt.Errorf("cuda: dit: width %d is not a multiple of %d (the GEMM's K tile)", D, kernels.DiTGemmBK)
	case s.PatchDim%2 != 0 || s.Heads*s.HeadDim != D:
		return nil, fmt.Errorf("cuda: dit: patch width %d (must be even), %d heads of %d for width %d", s.PatchDim, s.Heads, s.HeadDim, D)
	}
	r := &DiTRunner{dev: dev, fns: map[string]driver.Func{}, vecs: map[*float32]driver.Ptr{}, mats: map[*float32]driver.Ptr{},
		ffn: (s.FFN + kernels.DiTGemmBK - 1) / kernels.DiTGemmBK * kernels.DiTGemmBK, attn: attn, graph: !opts.NoGraph}
	img := opts.Module
	if img == nil {
		img = kernels.Image
	}
	if r.mod, err = dev.Load(img); err != nil {
		return nil, fmt.Errorf("cuda: dit: load kernels: %w", err)
	}
	fail := func(err error) (*DiTRunner, error) {
		r.Close()
		return nil, fmt.Errorf("cuda: dit: %w", err)
	}
	F, FP := s.FFN, r.ffn
	for _, g := range []struct {
		bs  []diffusion.BlockSpec
		dst *[]blockW
	}{{s.NoiseRefiner, &r.noise}, {s.ContextRefiner, &r.ctx}, {s.Layers, &r.layers}} {
		for i := range g.bs {
			b := &g.bs[i]
			var w blockW
			var err error
			q, k, v := b.Q, b.K, b.V
			if w.qkv, err = r.matrix(q, 3*D, D, func(i int, dst []float32) {
				copy(dst, [][]float32{q, k, v}[i/D][i%D*D:(i%D+1)*D])
			}); err != nil {
				return fail(err)
			}
			o := b.O
			if w.o, err = r.matrix(o, D, D, func(i int, dst []float32) { copy(dst, o[i*D:(i+1)*D]) }); err != nil {
				return fail(err)
			}
			w1, w3 := b.W1, b.W3
			if w.w13, err = r.matrix(w1, 2*FP, D, func(i int, dst []float32) {
				if i/2 >= F {
					clear(dst)
					return
				}
				src := w1
				if i%2 == 1 {
					src = w3
				}
				copy(dst, src[i/2*D:(i/2+1)*D])
			}); err != nil {
				return fail(err)
			}
			w2 := b.W2
			if w.w2, err = r.matrix(w2, D, FP, func(i int, dst []float32) {
				copy(dst, w2[i*F:(i+1)*F])
				clear(dst[F:])
			}); err != nil {
				return fail(err)
			}
			for _, x := range []struct {
				p *driver.Ptr
				v []float32
			}{{&w.qn, b.QNorm}, {&w.kn, b.KNorm}, {&w.an1, b.AttnNorm1}, {&w.an2, b.AttnNorm2}, {&w.fn1, b.FFNNorm1}, {&w.fn2, b.FFNNorm2}} {
				if *x.p, err = r.vector(x.v); err != nil {
					return fail(err)
				}
			}
			*g.dst = append(*g.dst, w)
		}
	}
	fw := s.FinalW
	if r.finalW, err = r.matrix(fw, s.PatchDim, D, func(i int, dst []float32) { copy(dst, fw[i*D:(i+1)*D]) }); err != nil {
		return fail(err)
	}
	if r.finalB, err = r.vector(s.FinalB); err != nil {
		return fail(err)
	}
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
	r.mats = nil
	return r, nil
}

func (r *DiTRunner) alloc(n int64) (driver.Ptr, error) {
	p, err := r.dev.Alloc(n)
	if err != nil {
		return 0, err
	}
	r.allocs = append(r.allocs, p)
	return p, nil
}

// matrix uploads an [out][in] matrix (row i written into dst by row) as
// f16, once per key (blocks sharing weights share the upload).
func (r *DiTRunner) matrix(key []float32, out, in int, row func(i int, dst []float32)) (driver.Ptr, error) {
	if p, ok := r.mats[&key[0]]; ok {
		return p, nil
	}
	p, err := r.alloc(int64(2 * out * in))
	if err != nil {
		return 0, err
	}
	const chunk = 1024 // rows an upload
	f := make([]float32, min(chunk, out)*in)
	h := make([]uint16, len(f))
	for r0 := 0; r0 < out; r0 += chunk {
		n := min(chunk, out-r0)
		for i := range n {
			row(r0+i, f[i*in:(i+1)*in])
		}
		for i, v := range f[:n*in] {
			h[i] = tensor.F32ToF16(v)
		}
		if err := r.dev.Upload(p+driver.Ptr(2*r0*in), driver.Bytes(h[:n*in])); err != nil {
			return 0, err
		}
	}
	r.mats[&key[0]] = p
	r.WeightBytes += int64(2 * out * in)
	return p, nil
}

// vector uploads a float array once (0 for an absent one).
func (r *DiTRunner) vector(x []float32) (driver.Ptr, error) {
	if len(x) == 0 {
		return 0, nil
	}
	if p, ok := r.vecs[&x[0]]; ok {
		return p, nil
	}
	p, err := r.alloc(int64(4 * len(x)))
	if err != nil {
		return 0, err
	}
	if err := r.dev.Upload(p, driver.Bytes(x)); err != nil {
		return 0, err
	}
	r.vecs[&x[0]] = p
	r.WeightBytes += int64(4 * len(x))
	return p, nil
}

// Close releases the device memory (not the device).
func (r *DiTRunner) Close() {
	r.Trim()
	for _, p := range r.allocs {
		r.dev.Free(p)
	}
	r.allocs = nil
}

// fn is a kernel of the module, its shared memory limit raised once.
func (r *DiTRunner) fn(name string, shared uint32) (driver.Func, error) {
	if f, ok := r.fns[name]; ok {
		return f, nil
	}
	f, err := r.dev.Function(r.mod, name)
	if err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	if shared > 48<<10 {
		if err := r.dev.SetSharedLimit(f, int(shared)); err != nil {
			return 0, fmt.Errorf("kernel %s: %w", name, err)
		}
	}
	r.fns[name] = f
	return f, nil
}

// ditRun is one layout's activations (the stream's rows: image rows, then
// caption rows) and its captured step.
type ditRun struct {
	r               *DiTRunner
	in              *diffusion.DiTInput // layout only
	rows            int
	u, y, rope, mod driver.Ptr // f32
	fs, out         driver.Ptr // f32
	h, qkv, att, g  driver.Ptr // f16
	allocs          []driver.Ptr
	graph           driver.Graph
	hasGraph        bool
	launches        int
	err             error
}

func (d *ditRun) buf(n int64) driver.Ptr {
	if d.err != nil {
		return 0
	}
	p, err := d.r.dev.Alloc(n)
	if err != nil {
		d.err = err
		return 0
	}
	d.allocs = append(d.allocs, p)
	if err := d.r.dev.Zero(p, n); err != nil {
		d.err = err
	}
	return p
}

func (d *ditRun) release() {
	if d.hasGraph {
		d.r.dev.DestroyGraph(d.graph)
		d.hasGraph = false
	}
	for _, p := range d.allocs {
		d.r.dev.Free(p)
	}
	d.allocs = nil
}

// launch queues kernel name on geometry g.
func (d *ditRun) launch(name string, g kernels.Geometry, args ...driver.Arg) {
	if d.err != nil {
		return
	}
	f, err := d.r.fn(name, g.Shared)
	if err != nil {
		d.err = err
		return
	}
	grid := driver.Dim3{X: g.Grid[0], Y: g.Grid[1], Z: g.Grid[2]}
	block := driver.Dim3{X: g.Block[0], Y: g.Block[1], Z: g.Block[2]}
	if err := d.r.dev.Launch(f, grid, block, int(g.Shared), args...); err != nil {
		d.err = fmt.Errorf("%w (kernel %s)", err, name)
	}
	d.launches++
}

func p(x driver.Ptr) driver.Arg { return driver.P(x) }

// gemm queues Y = A·Wᵀ (A [M][K] f16, W [N][K] f16) with epilogue mode.
func (d *ditRun) gemm(mode string, y, a, w, bias driver.Ptr, M, N, K, ldy int) {
	d.launch(kernels.DiTGemmPrefix+mode+kernels.DiTGemmTiling(N), kernels.DiTGemmLaunch(M, N), p(y), p(a), p(w), p(bias),
		driver.I32(M), driver.I32(N), driver.I32(K), driver.I32(ldy))
}

// rowOff is the byte offset of row r of a [rows][cols] array of size-byte
// values.
func rowOff(base driver.Ptr, r, cols, size int) driver.Ptr {
	return base + driver.Ptr(r*cols*size)
}

// mods are modulation vector m's parts on the device: 1+scale_msa,
// tanh(gate_msa), 1+scale_mlp, tanh(gate_mlp) (zeros: m < 0, unmodulated).
func (d *ditRun) mods(m int) (sc1, g1, sc2, g2 driver.Ptr) {
	if m < 0 {
		return
	}
	D := d.r.s.Dim
	base := d.mod + driver.Ptr(4*4*m*D)
	return base, base + driver.Ptr(4*D), base + driver.Ptr(8*D), base + driver.Ptr(12*D)
}

// block queues one transformer block on rows [r0, r0+n) of the stream,
// the attention over the same rows; m is the modulation vector's index
// (< 0: unmodulated). With headDone the block's first norm is already in
// h (the previous block's last kernel wrote it); with next, this block's
// last kernel writes the next block's first norm (modulation nm) into h.
func (d *ditRun) block(w *blockW, m, r0, n int, headDone bool, next *blockW, nm int) {
	s := d.r.s
	D, FP := s.Dim, d.r.ffn
	sc1, g1, sc2, g2 := d.mods(m)
	u, y := rowOff(d.u, r0, D, 4), rowOff(d.y, r0, D, 4)
	h, att := rowOff(d.h, r0, D, 2), rowOff(d.att, r0, D, 2)
	qkv, g := rowOff(d.qkv, r0, 3*D, 2), rowOff(d.g, r0, FP, 2)
	rope := rowOff(d.rope, r0, s.HeadDim, 4)
	if !headDone {
		d.launch(kernels.DiTNorm, kernels.DiTRowsLaunch(n), p(h), p(u), p(w.an1), p(sc1), driver.I32(D), driver.F32(s.Eps), driver.I32(0))
	}
	d.gemm(kernels.DiTGemmHalf, qkv, h, w.qkv, 0, n, 3*D, D, 3*D)
	d.launch(kernels.DiTQKRope, kernels.DiTQKRopeLaunch(n, s.Heads), p(qkv), p(rope), p(w.qn), p(w.kn),
		driver.I32(n), driver.I32(s.Heads), driver.I32(s.HeadDim), driver.I32(3*D), driver.F32(s.QKEps))
	d.launch(d.r.attn, kernels.DiTAttnLaunch(n, s.Heads, s.HeadDim), p(att), p(qkv), driver.I32(n), driver.I32(s.Heads),
		driver.I32(3*D), driver.I32(D), driver.F32(float32(1/math.Sqrt(float64(s.HeadDim)))))
	d.gemm(kernels.DiTGemmFloat, y, att, w.o, 0, n, D, D, D)
	d.launch(kernels.DiTNormAdd, kernels.DiTRowsLaunch(n), p(u), p(y), p(w.an2), p(g1), p(h), p(w.fn1), p(sc2), driver.I32(D), driver.F32(s.Eps))
	d.gemm(kernels.DiTGemmGLU, g, h, w.w13, 0, n, 2*FP, D, FP)
	d.gemm(kernels.DiTGemmFloat, y, g, w.w2, 0, n, D, FP, D)
	var nh, nw, ns driver.Ptr
	if next != nil {
		nh, nw = h, next.an1
		ns, _, _, _ = d.mods(nm)
	}
	d.launch(kernels.DiTNormAdd, kernels.DiTRowsLaunch(n), p(u), p(y), p(w.fn2), p(g2), p(nh), p(nw), p(ns), driver.I32(D), driver.F32(s.Eps))
}

// queue queues a whole evaluation of the layout.
func (d *ditRun) queue() {
	s, in := d.r.s, d.in
	for j := range d.r.noise {
		d.block(&d.r.noise[j], j, 0, in.ImgRows, false, nil, 0)
	}
	for j := range d.r.ctx {
		d.block(&d.r.ctx[j], -1, in.ImgRows, in.CapRows, false, nil, 0)
	}
	// The layers over all rows: each one's last kernel writes the next
	// one's first norm.
	L, nr := len(d.r.layers), len(d.r.noise)
	for j := range L {
		var next *blockW
		if j+1 < L {
			next = &d.r.layers[j+1]
		}
		d.block(&d.r.layers[j], nr+j, 0, d.rows, j > 0, next, nr+j+1)
	}
	d.launch(kernels.DiTNorm, kernels.DiTRowsLaunch(in.NImg), p(d.h), p(d.u), 0, p(d.fs), driver.I32(s.Dim), driver.F32(s.FinalEps), driver.I32(1))
	d.gemm(kernels.DiTGemmBias, d.out, d.h, d.r.finalW, d.r.finalB, in.NImg, s.PatchDim, s.Dim, s.PatchDim)
}

// Run implements diffusion.DiTDevice.
func (r *DiTRunner) Run(in *diffusion.DiTInput) ([]float32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s
	D := s.Dim
	if len(in.Img) != in.ImgRows*D || len(in.Cap) != in.CapRows*D || len(in.NoiseMod) != len(s.NoiseRefiner) ||
		len(in.LayerMod) != len(s.Layers) || len(in.ImgRope) != in.ImgRows*s.HeadDim || len(in.CapRope) != in.CapRows*s.HeadDim {
		return nil, errors.New("cuda: dit: input does not match the model")
	}
	d, err := r.recorded(in)
	if err != nil {
		return nil, err
	}
	var mods []float32
	for _, m := range in.NoiseMod {
		mods = append(mods, m...)
	}
	for _, m := range in.LayerMod {
		mods = append(mods, m...)
	}
	for _, w := range []struct {
		p driver.Ptr
		x []float32
	}{{d.u, in.Img}, {rowOff(d.u, in.ImgRows, D, 4), in.Cap}, {d.rope, in.ImgRope}, {rowOff(d.rope, in.ImgRows, s.HeadDim, 4), in.CapRope},
		{d.mod, mods}, {d.fs, in.FinalScale}} {
		if len(w.x) > 0 {
			if err := r.dev.Upload(w.p, driver.Bytes(w.x)); err != nil {
				return nil, fmt.Errorf("cuda: dit: %w", err)
			}
		}
	}
	if d.hasGraph {
		err = r.dev.LaunchGraph(d.graph)
	} else {
		d.launches = 0
		d.queue()
		err = d.err
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: dit: %w", err)
	}
	out := make([]float32, in.NImg*s.PatchDim)
	if err := r.dev.Read(driver.Bytes(out), d.out); err != nil {
		return nil, fmt.Errorf("cuda: dit: %w", err)
	}
	return out, nil
}

// recorded is the layout's activations and captured step, made on first
// use and kept for the next steps (at most two layouts: a guided
// generation alternates its two captions).
func (r *DiTRunner) recorded(in *diffusion.DiTInput) (*ditRun, error) {
	key := fmt.Sprintf("%d/%d/%d", in.ImgRows, in.NImg, in.CapRows)
	if d := r.recs[key]; d != nil {
		return d, nil
	}
	if len(r.recs) >= 2 {
		r.dropRecorded()
	}
	s := r.s
	D, N := int64(s.Dim), in.ImgRows+in.CapRows
	n := int64(N)
	d := &ditRun{r: r, in: &diffusion.DiTInput{ImgRows: in.ImgRows, NImg: in.NImg, CapRows: in.CapRows}, rows: N}
	d.u = d.buf(4 * n * D)
	d.y = d.buf(4 * n * D)
	d.rope = d.buf(4 * n * int64(s.HeadDim))
	d.mod = d.buf(4 * 4 * D * int64(len(s.NoiseRefiner)+len(s.Layers)))
	d.fs = d.buf(4 * D)
	d.out = d.buf(4 * int64(in.NImg*s.PatchDim))
	d.h = d.buf(2 * n * D)
	d.att = d.buf(2 * n * D)
	d.qkv = d.buf(2 * 3 * n * D)
	d.g = d.buf(2 * n * int64(r.ffn))
	if d.err == nil {
		// Resolve every kernel before a capture (no loads inside it).
		for _, k := range []struct {
			name   string
			shared uint32
		}{{kernels.DiTNorm, 0}, {kernels.DiTNormAdd, 0}, {kernels.DiTQKRope, 0},
			{r.attn, kernels.DiTAttnLaunch(1, 1, s.HeadDim).Shared}} {
			if _, err := r.fn(k.name, k.shared); err != nil {
				d.err = err
			}
		}
		for _, m := range []string{kernels.DiTGemmHalf, kernels.DiTGemmFloat, kernels.DiTGemmBias, kernels.DiTGemmGLU} {
			for _, n := range []int{1, 1 << 20} { // both tilings
				if _, err := r.fn(kernels.DiTGemmPrefix+m+kernels.DiTGemmTiling(n), kernels.DiTGemmLaunch(1, n).Shared); err != nil {
					d.err = err
				}
			}
		}
	}
	if d.err == nil {
		d.err = r.dev.Sync()
	}
	if d.err == nil && r.graph {
		if err := r.dev.BeginCapture(); err != nil {
			d.err = err
		} else {
			d.queue()
			g, err := r.dev.EndCapture()
			if d.err == nil && err != nil {
				d.err = err
			}
			if err == nil {
				d.graph, d.hasGraph = g, true
			}
		}
	}
	if d.err != nil {
		d.release()
		return nil, fmt.Errorf("cuda: dit: %w", d.err)
	}
	if r.recs == nil {
		r.recs = map[string]*ditRun{}
	}
	r.recs[key] = d
	return d, nil
}

// Trim implements diffusion.DiTTrimmer: it releases the activations and
// captured steps kept for the next evaluation.
func (r *DiTRunner) Trim() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropRecorded()
}

func (r *DiTRunner) dropRecorded() {
	for k, d := range r.recs {
		d.release()
		delete(r.recs, k)
	}
}

// ActivationBytes is the device memory a layout of rows stream rows and
// nImg image rows takes (what recorded allocates).
func (r *DiTRunner) ActivationBytes(rows, nImg int) int64 {
	s := r.s
	D, n := int64(s.Dim), int64(rows)
	return 4*n*D*2 + 4*n*int64(s.HeadDim) + 4*4*D*int64(len(s.NoiseRefiner)+len(s.Layers)) + 4*D + 4*int64(nImg*s.PatchDim) +
		2*n*D*2 + 2*3*n*D + 2*n*int64(r.ffn)
}

package device

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
)

// VAEDecoder runs an AutoencoderKL decoder (diffusion.VAESpec) on the
// device: the weights uploaded once, the activations resident, one latent
// upload, every layer in one submission, one image readback. Activations
// are f32 HWC, each kept as bands of whole rows so that no binding exceeds
// the limit (the device's storage binding and buffer limits, 128 MiB and
// 256 MiB in a browser, or VAEOptions.MaxBinding): a 1024² decode, whose
// largest activations are 512 MiB to 1 GiB, runs in bands. The banding
// does not change the arithmetic: a convolution reads its neighbour rows
// across bands (gathered into one binding when they straddle two), the
// group norms carry their per-invocation partial sums from band to band
// in the same order, and the mid attention, global, runs whole (its input
// must fit one binding: 32 MiB at 1024²). A tiled decode is bit for bit
// the untiled one.
type VAEDecoder struct {
	d     *gpu.Device
	s     *diffusion.VAESpec
	bufs  []*gpu.Buffer
	w     map[*float32]*gpu.Buffer // uploaded weight arrays by their first element
	limit uint64                   // bytes per activation binding
	// naiveConv runs every convolution on conv2d.wgsl (VAEOptions).
	naiveConv bool
}

// VAEOptions tunes NewVAEDecoder.
type VAEOptions struct {
	// MaxBinding caps the bytes of one activation binding below the
	// device's limits (0: the device's); tests use it to band small
	// images as a browser bands a 1024² one.
	MaxBinding uint64
	// NaiveConv runs every convolution on the one-invocation-per-output
	// kernel (conv2d.wgsl) instead of the tiled one where the input
	// channels allow (a multiple of 16): the reference it is tested
	// against.
	NaiveConv bool
}

// NewVAEDecoder uploads the decoder's weights.
func NewVAEDecoder(d *gpu.Device, s *diffusion.VAESpec, opts VAEOptions) (*VAEDecoder, error) {
	v := &VAEDecoder{d: d, s: s, w: map[*float32]*gpu.Buffer{}, limit: bindingLimit(d, opts.MaxBinding), naiveConv: opts.NaiveConv}
	var err error
	up := func(x []float32) {
		if err != nil || len(x) == 0 || v.w[&x[0]] != nil {
			return
		}
		var b *gpu.Buffer
		if b, err = v.upload("vae.weight", x); err == nil {
			v.w[&x[0]] = b
		}
	}
	conv := func(c *diffusion.ConvSpec) {
		if c != nil {
			up(c.W)
			up(c.B)
		}
	}
	norm := func(n diffusion.NormSpec) { up(n.W); up(n.B) }
	res := func(r *diffusion.ResnetSpec) {
		norm(r.Norm1)
		norm(r.Norm2)
		conv(&r.Conv1)
		conv(&r.Conv2)
		conv(r.Shortcut)
	}
	conv(s.PostQuantConv)
	conv(&s.ConvIn)
	res(&s.Mid1)
	res(&s.Mid2)
	if a := s.MidAttn; a != nil {
		norm(a.Norm)
		conv(&a.Q)
		conv(&a.K)
		conv(&a.V)
		conv(&a.O)
	}
	for i := range s.Up {
		for j := range s.Up[i].Resnets {
			res(&s.Up[i].Resnets[j])
		}
		conv(s.Up[i].Upsample)
	}
	norm(s.NormOut)
	conv(&s.ConvOut)
	if err != nil {
		v.Close()
		return nil, err
	}
	if err := d.Flush(); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

func (v *VAEDecoder) upload(label string, x []float32) (*gpu.Buffer, error) {
	b, err := v.d.NewStorage(label, uint64(max(4*len(x), 16)))
	if err != nil {
		return nil, err
	}
	v.bufs = append(v.bufs, b)
	if len(x) > 0 {
		if err := v.d.Write(b, 0, gpu.F32Bytes(x)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Close releases the device buffers.
func (v *VAEDecoder) Close() {
	for _, b := range v.bufs {
		b.Release()
	}
	v.bufs = nil
}

// act is an HWC activation of h×w pixels and c channels stored as bands
// of rows: band k holds rows [k·rows, min((k+1)·rows, h)).
type act struct {
	h, w, c int
	rows    int
	bands   []*gpu.Buffer
}

// band is band k's first row and row count.
func (a *act) band(k int) (int, int) {
	y0 := k * a.rows
	return y0, min(a.rows, a.h-y0)
}

// vaeRun records one decode. Buffers no longer read go back to a pool
// (by size) for later layers of the same submission: the compute pass
// orders each dispatch after the ones before it, so a reuse never races.
type vaeRun struct {
	imgRun
	v    *VAEDecoder
	pool map[uint64][]*gpu.Buffer
}

// get is a buffer of n floats, from the pool when one of the size is free.
func (r *vaeRun) get(n int) *gpu.Buffer {
	size := uint64(max(4*n, 16))
	if bs := r.pool[size]; len(bs) > 0 {
		r.pool[size] = bs[:len(bs)-1]
		return bs[len(bs)-1]
	}
	return r.buf(n)
}

// put returns b to the pool.
func (r *vaeRun) put(b *gpu.Buffer) {
	if b != nil {
		r.pool[b.Size()] = append(r.pool[b.Size()], b)
	}
}

// newAct is an h×w×c activation in bands under the binding limit.
func (r *vaeRun) newAct(h, w, c int) *act {
	if r.err != nil {
		return nil
	}
	row := uint64(4 * w * c)
	if row > r.v.limit {
		r.err = fmt.Errorf("an image row of %d pixels × %d channels (%d bytes) exceeds the %d-byte binding limit", w, c, row, r.v.limit)
		return nil
	}
	a := &act{h: h, w: w, c: c, rows: min(h, int(r.v.limit/row))}
	for k := 0; k*a.rows < h; k++ {
		_, n := a.band(k)
		a.bands = append(a.bands, r.get(n*w*c))
	}
	return a
}

// free returns a's bands to the pool.
func (r *vaeRun) free(a *act) {
	if a == nil {
		return
	}
	for _, b := range a.bands {
		r.put(b)
	}
	a.bands = nil
}

// conv returns y = conv(x) (+ res), x first upsampled 2× (nearest) when
// up. Each output band is computed in chunks of rows whose input rows
// (with the kernel's halo) fit one binding: one band of x when they lie
// in one, else gathered from the bands they straddle.
func (r *vaeRun) conv(c *diffusion.ConvSpec, x *act, up bool, res *act) *act {
	if r.err != nil {
		return nil
	}
	H, W := x.h, x.w
	if up {
		H, W = 2*H, 2*W
	}
	y := r.newAct(H, W, c.Out)
	if r.err != nil {
		return nil
	}
	if res != nil && (res.h != H || res.w != W || res.c != c.Out || res.rows != y.rows) {
		r.err = fmt.Errorf("conv residual of %d×%d×%d in bands of %d rows for an output of %d×%d×%d in bands of %d", res.h, res.w, res.c, res.rows, H, W, c.Out, y.rows)
		return nil
	}
	rad := c.K / 2
	// in is the input rows [lo, hi) output rows [s, e) read.
	in := func(s, e int) (int, int) {
		lo, hi := max(s-rad, 0), min(e+rad, H)
		if up {
			lo, hi = lo/2, (hi-1)/2+1
		}
		return lo, hi
	}
	rowElems := x.w * x.c
	maxIn := int(r.v.limit / uint64(4*rowElems))
	for k := range y.bands {
		bs, bn := y.band(k)
		for s := bs; s < bs+bn; {
			if lo, hi := in(s, s+1); hi-lo > maxIn {
				r.err = fmt.Errorf("a %d×%d convolution over rows of %d pixels × %d channels: the %d rows it reads exceed the %d-byte binding limit", c.K, c.K, x.w, x.c, hi-lo, r.v.limit)
				return nil
			}
			// The longest chunk from s whose input fits (binary search).
			a, b := s+1, bs+bn
			for a < b {
				m := (a + b + 1) / 2
				if lo, hi := in(s, m); hi-lo <= maxIn {
					a = m
				} else {
					b = m - 1
				}
			}
			e := a
			lo, hi := in(s, e)
			xb, xbase, tmp := r.rowsOf(x, lo, hi)
			hasRes, rb := flag(res != nil), r.dummy() // unread without res; y cannot be bound twice
			if res != nil {
				rb = res.bands[k]
			}
			par := r.uniform(shaders.Conv2DParams{H: u32(H), W: u32(W), CIn: u32(c.In), COut: u32(c.Out), K: u32(c.K), Res: hasRes,
				Up: flag(up), Y0: u32(s), Rows: u32(e - s), YBase: u32(bs), XBase: u32(xbase)})
			if c.In%16 == 0 && !r.v.naiveConv {
				// 64 pixels x 64 output channels a workgroup.
				gx, gy := grid((e-s)*W, 64)
				r.dispatch(shaders.Conv2DTiled, gx, gy, uint32((c.Out+63)/64), par, xb, r.w(c.W), r.w(c.B), rb, y.bands[k])
			} else {
				gx, gy := grid((e-s)*W*c.Out, 256)
				r.dispatch(shaders.Conv2D, gx, gy, 1, par, xb, r.w(c.W), r.w(c.B), rb, y.bands[k])
			}
			r.put(tmp)
			s = e
		}
	}
	return y
}

// rowsOf is a binding holding rows [lo, hi) of x and the row it starts
// at: x's band when one holds them all, else a temporary buffer (also
// returned, for the pool) the rows are copied into.
func (r *vaeRun) rowsOf(x *act, lo, hi int) (*gpu.Buffer, int, *gpu.Buffer) {
	k0, k1 := lo/x.rows, (hi-1)/x.rows
	if k0 == k1 {
		return x.bands[k0], k0 * x.rows, nil
	}
	re := x.w * x.c
	tmp := r.get((hi - lo) * re)
	for k := k0; k <= k1; k++ {
		y0, n := x.band(k)
		a, b := max(lo, y0), min(hi, y0+n)
		gx, gy := grid((b-a)*re, 256)
		r.dispatch(shaders.CopyF32, gx, gy, 1,
			r.uniform(shaders.CopyF32Params{N: u32((b - a) * re), SOff: u32((a - y0) * re), DOff: u32((a - lo) * re)}), x.bands[k], tmp)
	}
	return tmp, lo, tmp
}

// groupNorm normalizes x into a new activation (then SiLU when silu): the
// statistics in two passes over the bands, then the affine map band by
// band.
func (r *vaeRun) groupNorm(n diffusion.NormSpec, x *act, silu bool) *act {
	if r.err != nil {
		return nil
	}
	G := r.v.s.Groups
	stats, part := r.get(2*G), r.get(256*G)
	for pass := range 2 {
		for k, b := range x.bands {
			y0, rows := x.band(k)
			r.dispatch(shaders.GroupNormStats, uint32(G), 1, 1,
				r.uniform(shaders.GroupNormStatsParams{Pixels: u32(rows * x.w), C: u32(x.c), Groups: u32(G), Eps: r.v.s.Eps,
					Pix0: u32(y0 * x.w), Total: u32(x.h * x.w), Pass: u32(pass)}), b, stats, part)
		}
	}
	y := r.newAct(x.h, x.w, x.c)
	if r.err != nil {
		return nil
	}
	for k, b := range x.bands {
		_, rows := x.band(k)
		P := rows * x.w
		gx, gy := grid(P*x.c, 256)
		r.dispatch(shaders.GroupNormApply, gx, gy, 1,
			r.uniform(shaders.GroupNormApplyParams{Pixels: u32(P), C: u32(x.c), Groups: u32(G), SiLU: flag(silu)}), stats, r.w(n.W), r.w(n.B), b, y.bands[k])
	}
	r.put(stats)
	r.put(part)
	return y
}

// resnet returns the block's output; x stays the caller's.
func (r *vaeRun) resnet(s *diffusion.ResnetSpec, x *act) *act {
	h := r.groupNorm(s.Norm1, x, true)
	h2 := r.conv(&s.Conv1, h, false, nil)
	r.free(h)
	h = r.groupNorm(s.Norm2, h2, true)
	r.free(h2)
	short := x
	if s.Shortcut != nil {
		short = r.conv(s.Shortcut, x, false, nil)
	}
	y := r.conv(&s.Conv2, h, false, short)
	r.free(h)
	if short != x {
		r.free(short)
	}
	return y
}

// attention is the mid block's attention over all pixels at once: its
// activations must each fit one binding.
func (r *vaeRun) attention(a *diffusion.AttnSpec, x *act) *act {
	if r.err != nil {
		return nil
	}
	P, C := x.h*x.w, a.Q.In
	if C > 1024 {
		r.err = fmt.Errorf("mid attention of width %d (the kernel takes at most 1024)", C)
		return nil
	}
	if len(x.bands) != 1 {
		r.err = fmt.Errorf("mid attention over %d×%d pixels × %d channels: %d bytes exceed the %d-byte binding limit (it is global, so runs whole)", x.w, x.h, C, 4*P*C, r.v.limit)
		return nil
	}
	h := r.groupNorm(a.Norm, x, false)
	q := r.conv(&a.Q, h, false, nil)
	k := r.conv(&a.K, h, false, nil)
	v := r.conv(&a.V, h, false, nil)
	r.free(h)
	o := r.newAct(x.h, x.w, C)
	if r.err != nil {
		return nil
	}
	gx, gy := uint32(min(P, 65535)), uint32((P+65534)/65535)
	r.dispatch(shaders.AttentionFull, gx, gy, 1,
		r.uniform(shaders.AttentionFullParams{N: u32(P), D: u32(C), Scale: float32(1 / math.Sqrt(float64(C))), Stride: u32(C)}),
		q.bands[0], k.bands[0], v.bands[0], o.bands[0])
	r.free(q)
	r.free(k)
	r.free(v)
	y := r.conv(&a.O, o, false, x)
	r.free(o)
	return y
}

// Decode implements diffusion.Decoder: z [C, h, w] to [out, h·s, w·s].
func (v *VAEDecoder) Decode(z []float32, h, w int) ([]float32, error) {
	s := v.s
	L := s.LatentChannels
	if len(z) != L*h*w {
		return nil, fmt.Errorf("webgpu: vae: latents of %d values, want %d×%d×%d", len(z), L, h, w)
	}
	hwc := make([]float32, len(z))
	for c := range L {
		for p := range h * w {
			hwc[p*L+c] = z[c*h*w+p]
		}
	}
	r := &vaeRun{imgRun: imgRun{d: v.d, wts: v.w}, v: v, pool: map[uint64][]*gpu.Buffer{}}
	defer r.release()
	x := r.newAct(h, w, L)
	if r.err == nil {
		for k, b := range x.bands {
			y0, n := x.band(k)
			if r.err = v.d.Write(b, 0, gpu.F32Bytes(hwc[y0*w*L:(y0+n)*w*L])); r.err != nil {
				break
			}
		}
	}
	// step replaces x by f(x), x back to the pool.
	step := func(f func(*act) *act) {
		y := f(x)
		r.free(x)
		x = y
	}
	if s.PostQuantConv != nil {
		step(func(x *act) *act { return r.conv(s.PostQuantConv, x, false, nil) })
	}
	step(func(x *act) *act { return r.conv(&s.ConvIn, x, false, nil) })
	step(func(x *act) *act { return r.resnet(&s.Mid1, x) })
	if s.MidAttn != nil {
		step(func(x *act) *act { return r.attention(s.MidAttn, x) })
	}
	step(func(x *act) *act { return r.resnet(&s.Mid2, x) })
	for i := range s.Up {
		u := &s.Up[i]
		for j := range u.Resnets {
			step(func(x *act) *act { return r.resnet(&u.Resnets[j], x) })
		}
		if u.Upsample != nil {
			step(func(x *act) *act { return r.conv(u.Upsample, x, true, nil) })
		}
	}
	step(func(x *act) *act { return r.groupNorm(s.NormOut, x, true) })
	step(func(x *act) *act { return r.conv(&s.ConvOut, x, false, nil) })
	if r.err != nil {
		return nil, fmt.Errorf("webgpu: vae: %w", r.err)
	}
	if err := v.d.Run(nil, r.ds, nil); err != nil {
		return nil, fmt.Errorf("webgpu: vae: %w", err)
	}
	H, W, O := x.h, x.w, s.OutChannels
	chw := make([]float32, O*H*W)
	for k, b := range x.bands {
		y0, n := x.band(k)
		raw, err := v.d.ReadBuffer(b, uint64(4*n*W*O))
		if err != nil {
			return nil, fmt.Errorf("webgpu: vae: %w", err)
		}
		out := gpu.BytesF32(raw)
		for p := range n * W {
			for c := range O {
				chw[c*H*W+y0*W+p] = out[p*O+c]
			}
		}
	}
	return chw, nil
}

package device

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// DiTRunner runs the Z-Image transformer's blocks and final layer on the
// device (diffusion.DiTDevice): the weights uploaded once as f32, each
// evaluation one upload of the embedded rows, RoPE rows and modulation
// vectors, every block in one submission, one readback of the final
// layer's output. The embedders and the timestep MLP stay on the CPU
// (diffusion.DiT.Prepare).
type DiTRunner struct {
	d    *gpu.Device
	s    *diffusion.DiTSpec
	wts  map[*float32]*gpu.Buffer
	qw   map[*float32]codedWeight // block matrices stored in a codec
	bufs []*gpu.Buffer
	// batchLimit is the most bytes of a batch's widest stream buffer.
	batchLimit uint64
}

// codedWeight is a matrix in the device layout of a codec.
type codedWeight struct {
	buf   *gpu.Buffer
	codec tensor.Codec
	soff  uint32 // q8_0/q4_0: the scale plane's offset in u32
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
}

// NewDiTRunner uploads the blocks' weights.
func NewDiTRunner(d *gpu.Device, s *diffusion.DiTSpec, opts DiTOptions) (*DiTRunner, error) {
	if s.HeadDim > 1024 || s.HeadDim%2 != 0 {
		return nil, fmt.Errorf("webgpu: dit: head dimension %d (the kernels take even sizes up to 1024)", s.HeadDim)
	}
	switch opts.Codec {
	case tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0:
	default:
		return nil, fmt.Errorf("webgpu: dit: weights as %s (f32, f16, q8_0 or q4_0)", opts.Codec)
	}
	r := &DiTRunner{d: d, s: s, wts: map[*float32]*gpu.Buffer{}, qw: map[*float32]codedWeight{}, batchLimit: bindingLimit(d, opts.BatchBytes)}
	var xs [][]float32
	for _, bs := range [][]diffusion.BlockSpec{s.NoiseRefiner, s.ContextRefiner, s.Layers} {
		for _, b := range bs {
			xs = append(xs, b.QNorm, b.KNorm, b.AttnNorm1, b.AttnNorm2, b.FFNNorm1, b.FFNNorm2)
			mats := []struct {
				w       []float32
				out, in int
			}{{b.Q, s.Dim, s.Dim}, {b.K, s.Dim, s.Dim}, {b.V, s.Dim, s.Dim}, {b.O, s.Dim, s.Dim},
				{b.W1, s.FFN, s.Dim}, {b.W3, s.FFN, s.Dim}, {b.W2, s.Dim, s.FFN}}
			for _, m := range mats {
				if opts.Codec == tensor.F32 || m.in%32 != 0 {
					xs = append(xs, m.w)
					continue
				}
				if err := r.uploadCoded(m.w, m.out, m.in, opts.Codec); err != nil {
					r.Close()
					return nil, fmt.Errorf("webgpu: dit: %w", err)
				}
			}
		}
	}
	xs = append(xs, s.FinalW, s.FinalB)
	if err := uploadWeights(d, r.wts, &r.bufs, xs...); err != nil {
		r.Close()
		return nil, fmt.Errorf("webgpu: dit: %w", err)
	}
	if err := d.Flush(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// uploadCoded encodes a [out, in] matrix with codec c in the device layout.
func (r *DiTRunner) uploadCoded(w []float32, out, in int, c tensor.Codec) error {
	n, err := tensor.ByteLen(c, []int{out, in})
	if err != nil {
		return err
	}
	enc := make([]byte, n)
	if err := tensor.Quantize(enc, c, w); err != nil {
		return err
	}
	var soff uint32
	if d := shaders.DeviceCodecOf(c); d != nil && d.Pack != nil {
		enc, soff, err = d.Pack(nil, enc)
	}
	if err != nil {
		return err
	}
	size := (len(enc) + 15) &^ 15
	b, err := r.d.NewStorage("dit.weight", uint64(size))
	if err != nil {
		return err
	}
	r.bufs = append(r.bufs, b)
	if err := r.d.Write(b, 0, append(enc, make([]byte, size-len(enc))...)); err != nil {
		return err
	}
	r.qw[&w[0]] = codedWeight{buf: b, codec: c, soff: soff}
	return nil
}

// Close releases the device buffers.
func (r *DiTRunner) Close() {
	for _, b := range r.bufs {
		b.Release()
	}
	r.bufs = nil
}

// ditRun is one evaluation's buffers: the stream u [n, dim] (image rows,
// then caption rows) and scratch of the same row layout.
type ditRun struct {
	imgRun
	qw                    map[*float32]codedWeight
	s                     *diffusion.DiTSpec
	u, h, q, k, v, att, a *gpu.Buffer
	hn, g, up, f          *gpu.Buffer
	rope, mod, finalScale *gpu.Buffer
	rows                  int
}

func (r *ditRun) linear(x *gpu.Buffer, w, b []float32, in, out, row0, rows int, y *gpu.Buffer) {
	gx, gy := grid(rows*out, 256)
	hasB := len(b) > 0
	if q, ok := r.qw[&w[0]]; ok {
		r.dispatchCoded(q, gx, gy,
			r.uniform(shaders.LinearParams{Rows: u32(rows), NIn: u32(in), NOut: u32(out), Row0: u32(row0), HasBias: flag(hasB), SOff: q.soff}), x, q.buf, r.w(b), y)
		return
	}
	r.dispatch(shaders.Linear, gx, gy, 1,
		r.uniform(shaders.LinearParams{Rows: u32(rows), NIn: u32(in), NOut: u32(out), Row0: u32(row0), HasBias: flag(hasB)}), x, r.w(w), r.w(b), y)
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

func (r *ditRun) gatedAdd(y *gpu.Buffer, gateOff, row0, rows int) {
	gx, gy := grid(rows*r.s.Dim, 256)
	r.dispatch(shaders.GatedAdd, gx, gy, 1,
		r.uniform(shaders.GatedAddParams{Width: u32(r.s.Dim), Row0: u32(row0), Rows: u32(rows), HasGate: flag(gateOff >= 0), GateOff: u32(max(gateOff, 0))}), y, r.mod, r.u)
}

// seg is one sequence's rows [row0, row0+rows) of u: attention runs
// within it.
type seg struct{ row0, rows int }

// block runs one transformer block on rows [row0, row0+rows) of u, the
// attention within each of segs (which cover them); m is its modulation
// vector's index (< 0: unmodulated).
func (r *ditRun) block(b *diffusion.BlockSpec, m, row0, rows int, segs ...seg) {
	s := r.s
	D, F := s.Dim, s.FFN
	off := func(k int) int {
		if m < 0 {
			return -1
		}
		return (4*m + k) * D
	}
	r.norm(r.u, b.AttnNorm1, off(0), 0, row0, rows, s.Eps, r.h)
	r.linear(r.h, b.Q, nil, D, D, row0, rows, r.q)
	r.linear(r.h, b.K, nil, D, D, row0, rows, r.k)
	r.linear(r.h, b.V, nil, D, D, row0, rows, r.v)
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
		r.dispatch(shaders.AttentionFull,
			uint32(min(sg.rows, 65535)), uint32((sg.rows+65534)/65535), uint32(s.Heads),
			r.uniform(shaders.AttentionFullParams{N: u32(sg.rows), D: u32(s.HeadDim), Scale: float32(1 / math.Sqrt(float64(s.HeadDim))), Stride: u32(D), Row0: u32(sg.row0)}), r.q, r.k, r.v, r.att)
	}
	r.linear(r.att, b.O, nil, D, D, row0, rows, r.a)
	r.norm(r.a, b.AttnNorm2, -1, 0, row0, rows, s.Eps, r.hn)
	r.gatedAdd(r.hn, off(1), row0, rows)

	r.norm(r.u, b.FFNNorm1, off(2), 0, row0, rows, s.Eps, r.h)
	r.linear(r.h, b.W1, nil, D, F, row0, rows, r.g)
	r.linear(r.h, b.W3, nil, D, F, row0, rows, r.up)
	gx, gy := grid(rows*F, 256)
	r.dispatch(shaders.SiLUMul, gx, gy, 1,
		r.uniform(shaders.SiLUMulParams{N: u32(rows * F), Off: u32(row0 * F)}), r.up, r.g)
	r.linear(r.g, b.W2, nil, F, D, row0, rows, r.f)
	r.norm(r.f, b.FFNNorm2, -1, 0, row0, rows, s.Eps, r.hn)
	r.gatedAdd(r.hn, off(3), row0, rows)
}

// dispatchCoded queues the codec's linear kernel.
func (r *ditRun) dispatchCoded(q codedWeight, gx, gy uint32, bufs ...*gpu.Buffer) {
	if r.err != nil {
		return
	}
	key := "img/linear/" + q.codec.String()
	p, err := r.d.PipelineOf(key, func() (string, error) { return shaders.LinearCodec(q.codec) }, kinds(shaders.KLinearC))
	if err != nil {
		r.err = err
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
	r.ds = append(r.ds, gpu.Dispatch{P: p, G: g, X: gx, Y: gy, Z: 1, Label: key})
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
	if len(ins) > 1 && uint64(4*N*max(d.s.Dim, d.s.FFN)) > d.batchLimit {
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
	s := d.s
	D, F := s.Dim, s.FFN
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
	r := &ditRun{imgRun: imgRun{d: d.d, wts: d.wts}, qw: d.qw, s: s, rows: N}
	defer r.release()
	var u, rope []float32
	for _, in := range ins {
		u = append(append(u, in.Img...), in.Cap...)
		rope = append(append(rope, in.ImgRope...), in.CapRope...)
	}
	r.u = r.upload(u)
	r.rope = r.upload(rope)
	var mods []float32
	for _, m := range ins[0].NoiseMod {
		mods = append(mods, m...)
	}
	for _, m := range ins[0].LayerMod {
		mods = append(mods, m...)
	}
	r.mod = r.upload(mods)
	r.finalScale = r.upload(ins[0].FinalScale)
	for _, p := range []**gpu.Buffer{&r.h, &r.q, &r.k, &r.v, &r.att, &r.a, &r.hn, &r.f} {
		*p = r.buf(N * D)
	}
	r.g, r.up = r.buf(N*F), r.buf(N*F)
	last := len(ins) - 1
	outRows := base[last] + ins[last].NImg
	out := r.buf(outRows * s.PatchDim)

	for j := range s.NoiseRefiner {
		for i, in := range ins {
			r.block(&s.NoiseRefiner[j], j, base[i], in.ImgRows)
		}
	}
	for j := range s.ContextRefiner {
		for i, in := range ins {
			r.block(&s.ContextRefiner[j], -1, base[i]+in.ImgRows, in.CapRows)
		}
	}
	segs := make([]seg, len(ins))
	for i, in := range ins {
		segs[i] = seg{base[i], in.ImgRows + in.CapRows}
	}
	for j := range s.Layers {
		r.block(&s.Layers[j], len(s.NoiseRefiner)+j, 0, N, segs...)
	}
	for i, in := range ins {
		r.norm(r.u, nil, -2, 1, base[i], in.NImg, s.FinalEps, r.h)
		r.linear(r.h, s.FinalW, s.FinalB, D, s.PatchDim, base[i], in.NImg, out)
	}
	if r.err != nil {
		return nil, fmt.Errorf("webgpu: dit: %w", r.err)
	}
	if err := d.d.Run(nil, r.ds, nil); err != nil {
		return nil, fmt.Errorf("webgpu: dit: %w", err)
	}
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

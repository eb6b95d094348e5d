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
// are f32 HWC; each must fit one storage binding (the device's limit, 128
// MiB in a browser), which bounds the image size until the decoder is
// tiled.
type VAEDecoder struct {
	d    *gpu.Device
	s    *diffusion.VAESpec
	bufs []*gpu.Buffer
	w    map[*float32]*gpu.Buffer // uploaded weight arrays by their first element
}

// NewVAEDecoder uploads the decoder's weights.
func NewVAEDecoder(d *gpu.Device, s *diffusion.VAESpec) (*VAEDecoder, error) {
	v := &VAEDecoder{d: d, s: s, w: map[*float32]*gpu.Buffer{}}
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

// vaeRun records one decode.
type vaeRun struct {
	imgRun
	v *VAEDecoder
}

// conv returns y = conv(x) (+ res).
func (r *vaeRun) conv(c *diffusion.ConvSpec, x *gpu.Buffer, H, W int, res *gpu.Buffer) *gpu.Buffer {
	y := r.buf(H * W * c.Out)
	hasRes := flag(res != nil)
	if res == nil {
		res = r.dummy() // unread; y cannot be bound twice
	}
	gx, gy := grid(H*W*c.Out, 256)
	r.dispatch(shaders.Conv2D, gx, gy, 1,
		r.uniform(shaders.Conv2DParams{H: u32(H), W: u32(W), CIn: u32(c.In), COut: u32(c.Out), K: u32(c.K), Res: hasRes}), x, r.w(c.W), r.w(c.B), res, y)
	return y
}

// groupNorm normalizes x [H·W, C] into a new buffer (then SiLU when silu).
func (r *vaeRun) groupNorm(n diffusion.NormSpec, x *gpu.Buffer, P, C int, silu bool) *gpu.Buffer {
	y := r.buf(P * C)
	stats := r.buf(2 * r.v.s.Groups)
	r.dispatch(shaders.GroupNormStats, uint32(r.v.s.Groups), 1, 1,
		r.uniform(shaders.GroupNormStatsParams{Pixels: u32(P), C: u32(C), Groups: u32(r.v.s.Groups), Eps: r.v.s.Eps}), x, stats)
	gx, gy := grid(P*C, 256)
	r.dispatch(shaders.GroupNormApply, gx, gy, 1,
		r.uniform(shaders.GroupNormApplyParams{Pixels: u32(P), C: u32(C), Groups: u32(r.v.s.Groups), SiLU: flag(silu)}), stats, r.w(n.W), r.w(n.B), x, y)
	return y
}

func (r *vaeRun) resnet(s *diffusion.ResnetSpec, x *gpu.Buffer, H, W int) *gpu.Buffer {
	P := H * W
	h := r.groupNorm(s.Norm1, x, P, s.Conv1.In, true)
	h = r.conv(&s.Conv1, h, H, W, nil)
	h = r.groupNorm(s.Norm2, h, P, s.Conv2.In, true)
	short := x
	if s.Shortcut != nil {
		short = r.conv(s.Shortcut, x, H, W, nil)
	}
	return r.conv(&s.Conv2, h, H, W, short)
}

func (r *vaeRun) attention(a *diffusion.AttnSpec, x *gpu.Buffer, H, W int) *gpu.Buffer {
	P, C := H*W, a.Q.In
	if C > 1024 {
		r.err = fmt.Errorf("webgpu: vae mid attention of width %d (the kernel takes at most 1024)", C)
		return nil
	}
	h := r.groupNorm(a.Norm, x, P, C, false)
	q := r.conv(&a.Q, h, H, W, nil)
	k := r.conv(&a.K, h, H, W, nil)
	v := r.conv(&a.V, h, H, W, nil)
	o := r.buf(P * C)
	gx, gy := uint32(min(P, 65535)), uint32((P+65534)/65535)
	r.dispatch(shaders.AttentionFull, gx, gy, 1,
		r.uniform(shaders.AttentionFullParams{N: u32(P), D: u32(C), Scale: float32(1 / math.Sqrt(float64(C))), Stride: u32(C)}), q, k, v, o)
	return r.conv(&a.O, o, H, W, x)
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
	r := &vaeRun{imgRun: imgRun{d: v.d, wts: v.w}, v: v}
	defer r.release()
	x := r.buf(len(hwc))
	if r.err == nil {
		r.err = v.d.Write(x, 0, gpu.F32Bytes(hwc))
	}
	H, W := h, w
	if s.PostQuantConv != nil {
		x = r.conv(s.PostQuantConv, x, H, W, nil)
	}
	x = r.conv(&s.ConvIn, x, H, W, nil)
	x = r.resnet(&s.Mid1, x, H, W)
	if s.MidAttn != nil {
		x = r.attention(s.MidAttn, x, H, W)
	}
	x = r.resnet(&s.Mid2, x, H, W)
	C := s.ConvIn.Out
	for i := range s.Up {
		u := &s.Up[i]
		for j := range u.Resnets {
			x = r.resnet(&u.Resnets[j], x, H, W)
			C = u.Resnets[j].Conv2.Out
		}
		if u.Upsample != nil {
			y := r.buf(4 * H * W * C)
			gx, gy := grid(4*H*W*C, 256)
			r.dispatch(shaders.Upsample2x, gx, gy, 1, r.uniform(shaders.Upsample2xParams{H: u32(H), W: u32(W), C: u32(C)}), x, y)
			H, W = 2*H, 2*W
			x = r.conv(u.Upsample, y, H, W, nil)
		}
	}
	x = r.groupNorm(s.NormOut, x, H*W, s.ConvOut.In, true)
	x = r.conv(&s.ConvOut, x, H, W, nil)
	if r.err != nil {
		return nil, fmt.Errorf("webgpu: vae: %w", r.err)
	}
	if err := v.d.Run(nil, r.ds, nil); err != nil {
		return nil, fmt.Errorf("webgpu: vae: %w", err)
	}
	O := s.OutChannels
	raw, err := v.d.ReadBuffer(x, uint64(4*H*W*O))
	if err != nil {
		return nil, fmt.Errorf("webgpu: vae: %w", err)
	}
	out := gpu.BytesF32(raw)
	chw := make([]float32, len(out))
	for p := range H * W {
		for c := range O {
			chw[c*H*W+p] = out[p*O+c]
		}
	}
	return chw, nil
}

package diffusion

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/tensor"
)

// VAEConfig is the vae's config.json (diffusers' AutoencoderKL arguments;
// only the decoder's are used).
type VAEConfig struct {
	InChannels           int      `json:"in_channels"`
	OutChannels          int      `json:"out_channels"`
	UpBlockTypes         []string `json:"up_block_types"`
	BlockOutChannels     []int    `json:"block_out_channels"`
	LayersPerBlock       int      `json:"layers_per_block"`
	ActFn                string   `json:"act_fn"`
	LatentChannels       int      `json:"latent_channels"`
	NormNumGroups        int      `json:"norm_num_groups"`
	ScalingFactor        float32  `json:"scaling_factor"`
	ShiftFactor          *float32 `json:"shift_factor"`
	UsePostQuantConv     bool     `json:"use_post_quant_conv"`
	MidBlockAddAttention bool     `json:"mid_block_add_attention"`
}

// isVAEConfig tells an autoencoder config by its contents.
func isVAEConfig(raw map[string]json.RawMessage) bool {
	_, a := raw["latent_channels"]
	_, b := raw["block_out_channels"]
	_, c := raw["up_block_types"]
	return a && b && c
}

func parseVAEConfig(b []byte) (VAEConfig, error) {
	c := VAEConfig{InChannels: 3, OutChannels: 3, UpBlockTypes: []string{"UpDecoderBlock2D"},
		BlockOutChannels: []int{64}, LayersPerBlock: 1, ActFn: "silu", LatentChannels: 4,
		NormNumGroups: 32, ScalingFactor: 0.18215, UsePostQuantConv: true, MidBlockAddAttention: true}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, err
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(b, &raw)
	for _, k := range []string{"latents_mean", "latents_std"} {
		if v, ok := raw[k]; ok && string(v) != "null" {
			return c, fmt.Errorf("%s is set: per-channel latent statistics are not supported", k)
		}
	}
	switch {
	case c.ActFn != "silu":
		return c, fmt.Errorf("act_fn %q (only silu)", c.ActFn)
	case len(c.BlockOutChannels) == 0 || len(c.UpBlockTypes) != len(c.BlockOutChannels):
		return c, fmt.Errorf("up_block_types %v do not match block_out_channels %v", c.UpBlockTypes, c.BlockOutChannels)
	case c.NormNumGroups <= 0 || c.LayersPerBlock <= 0 || c.LatentChannels <= 0 || c.OutChannels <= 0:
		return c, fmt.Errorf("norm_num_groups %d, layers_per_block %d, latent_channels %d, out_channels %d", c.NormNumGroups, c.LayersPerBlock, c.LatentChannels, c.OutChannels)
	case c.ScalingFactor == 0:
		return c, fmt.Errorf("scaling_factor is 0")
	}
	for _, t := range c.UpBlockTypes {
		if t != "UpDecoderBlock2D" {
			return c, fmt.Errorf("up block %q (only UpDecoderBlock2D)", t)
		}
	}
	for _, ch := range c.BlockOutChannels {
		if ch <= 0 || ch%c.NormNumGroups != 0 {
			return c, fmt.Errorf("block_out_channels %v are not multiples of norm_num_groups %d", c.BlockOutChannels, c.NormNumGroups)
		}
	}
	return c, nil
}

const vaeEps = 1e-6 // the decoder's group norms

// conv2d is a k×k convolution (stride 1, padding k/2) on HWC images. Its
// weight is stored [out, ky, kx, in] so that one output pixel is one
// matrix row times a gathered patch.
type conv2d struct {
	w       *linear   // [out, k·k·in]
	wf      []float32 // the same weights
	k       int
	in, out int
}

type groupNormW struct{ w, b []float32 }

func (g groupNormW) spec() NormSpec { return NormSpec{W: g.w, B: g.b} }

type resnet struct {
	norm1, norm2 groupNormW
	conv1, conv2 *conv2d
	shortcut     *conv2d // 1×1 when in ≠ out
}

type midAttention struct {
	norm       groupNormW
	q, k, v, o *linear
}

type upBlock struct {
	resnets  []*resnet
	upsample *conv2d // nil on the last block
}

// VAE is the AutoencoderKL decoder.
type VAE struct {
	Config        VAEConfig
	postQuantConv *conv2d
	convIn        *conv2d
	mid1, mid2    *resnet
	midAttn       *midAttention
	up            []*upBlock
	normOut       groupNormW
	convOut       *conv2d
	groups        int
}

// ScaleFactor is the spatial downscale of the latents (2^(blocks-1)).
func (v *VAE) ScaleFactor() int { return 1 << (len(v.Config.BlockOutChannels) - 1) }

func loadVAE(w *weights, c VAEConfig) (*VAE, error) {
	v := &VAE{Config: c, groups: c.NormNumGroups}
	var err error
	conv := func(name string, out, in, k int) *conv2d {
		if err != nil {
			return nil
		}
		var cv *conv2d
		cv, err = w.conv(name, out, in, k)
		return cv
	}
	gn := func(name string, ch int) groupNormW {
		if err != nil {
			return groupNormW{}
		}
		var g groupNormW
		if g.w, err = w.floats(name+".weight", ch); err == nil {
			g.b, err = w.floats(name+".bias", ch)
		}
		return g
	}
	res := func(prefix string, in, out int) *resnet {
		r := &resnet{norm1: gn(prefix+".norm1", in), conv1: conv(prefix+".conv1", out, in, 3),
			norm2: gn(prefix+".norm2", out), conv2: conv(prefix+".conv2", out, out, 3)}
		if in != out {
			r.shortcut = conv(prefix+".conv_shortcut", out, in, 1)
		}
		return r
	}
	L, boc := c.LatentChannels, c.BlockOutChannels
	top := boc[len(boc)-1]
	if c.UsePostQuantConv {
		v.postQuantConv = conv("post_quant_conv", L, L, 1)
	}
	v.convIn = conv("decoder.conv_in", top, L, 3)
	v.mid1 = res("decoder.mid_block.resnets.0", top, top)
	if c.MidBlockAddAttention {
		p := "decoder.mid_block.attentions.0."
		a := &midAttention{norm: gn(p+"group_norm", top)}
		lin := func(names ...string) *linear {
			if err != nil {
				return nil
			}
			name := names[0]
			for _, n := range names {
				if w.has(n + ".weight") {
					name = n
				}
			}
			var l *linear
			l, err = w.linear(name, top, top, true)
			return l
		}
		// diffusers' names; older checkpoints say query/key/value/proj_attn.
		a.q = lin(p+"to_q", p+"query")
		a.k = lin(p+"to_k", p+"key")
		a.v = lin(p+"to_v", p+"value")
		a.o = lin(p+"to_out.0", p+"proj_attn")
		v.midAttn = a
	}
	v.mid2 = res("decoder.mid_block.resnets.1", top, top)
	prev := top
	for i := range boc {
		out := boc[len(boc)-1-i]
		b := &upBlock{}
		for j := range c.LayersPerBlock + 1 {
			in := out
			if j == 0 {
				in = prev
			}
			b.resnets = append(b.resnets, res(fmt.Sprintf("decoder.up_blocks.%d.resnets.%d", i, j), in, out))
		}
		if i != len(boc)-1 {
			b.upsample = conv(fmt.Sprintf("decoder.up_blocks.%d.upsamplers.0.conv", i), out, out, 3)
		}
		v.up = append(v.up, b)
		prev = out
	}
	v.normOut = gn("decoder.conv_norm_out", boc[0])
	v.convOut = conv("decoder.conv_out", c.OutChannels, boc[0], 3)
	if err != nil {
		return nil, err
	}
	for _, name := range w.set.Names() {
		if !w.used[name] && (strings.HasPrefix(name, "decoder.") || (c.UsePostQuantConv && strings.HasPrefix(name, "post_quant_conv."))) {
			return nil, fmt.Errorf("%s: tensor %q is not part of the decoder this config describes", w.dir, name)
		}
	}
	return v, nil
}

// conv loads NAME.weight [out, in, k, k] (+ bias), reordered to [out, ky, kx, in].
func (w *weights) conv(name string, out, in, k int) (*conv2d, error) {
	src, err := w.floats(name+".weight", out, in, k, k)
	if err != nil {
		return nil, err
	}
	b, err := w.floats(name+".bias", out)
	if err != nil {
		return nil, err
	}
	dst := make([]float32, len(src))
	for o := range out {
		for i := range in {
			for y := range k {
				for x := range k {
					dst[((o*k+y)*k+x)*in+i] = src[((o*in+i)*k+y)*k+x]
				}
			}
		}
	}
	l := &linear{w: f32Tensor(name+".weight", dst, out, k*k*in), b: b, in: k * k * in, out: out, name: name}
	return &conv2d{w: l, wf: dst, k: k, in: in, out: out}, nil
}

// apply convolves x [H·W, in] into a new [H·W, out], zero padding.
func (c *conv2d) apply(x []float32, H, W int) []float32 {
	if c.k == 1 {
		return c.w.apply(x, H*W)
	}
	out := make([]float32, H*W*c.out)
	r := c.k / 2
	rowLen := c.k * c.k * c.in
	// Gather patches for a band of pixels at a time (bounded memory).
	band := max(1, min(H*W, (32<<20)/(4*rowLen)))
	cols := make([]float32, band*rowLen)
	for p0 := 0; p0 < H*W; p0 += band {
		n := min(band, H*W-p0)
		parallel(n, func(lo, hi int) {
			for pi := lo; pi < hi; pi++ {
				py, px := (p0+pi)/W, (p0+pi)%W
				row := cols[pi*rowLen : (pi+1)*rowLen]
				for ky := range c.k {
					for kx := range c.k {
						dst := row[(ky*c.k+kx)*c.in : (ky*c.k+kx+1)*c.in]
						sy, sx := py+ky-r, px+kx-r
						if sy < 0 || sy >= H || sx < 0 || sx >= W {
							clear(dst)
							continue
						}
						copy(dst, x[(sy*W+sx)*c.in:(sy*W+sx+1)*c.in])
					}
				}
			}
		})
		copy(out[p0*c.out:], c.w.apply(cols, n))
	}
	return out
}

// apply runs the resnet block on x [H·W, in] and returns [H·W, out].
func (r *resnet) apply(x []float32, H, W, groups int) []float32 {
	P := H * W
	h := append([]float32(nil), x...)
	groupNorm(h, P, r.conv1.in, groups, r.norm1.w, r.norm1.b, vaeEps)
	silu(h)
	h = r.conv1.apply(h, H, W)
	groupNorm(h, P, r.conv2.in, groups, r.norm2.w, r.norm2.b, vaeEps)
	silu(h)
	h = r.conv2.apply(h, H, W)
	short := x
	if r.shortcut != nil {
		short = r.shortcut.apply(x, H, W)
	}
	kernel.Add(h, short)
	return h
}

// apply is single-head self-attention over all pixels with a residual.
func (a *midAttention) apply(x []float32, H, W, groups int) []float32 {
	P, C := H*W, a.q.in
	h := append([]float32(nil), x...)
	groupNorm(h, P, C, groups, a.norm.w, a.norm.b, vaeEps)
	q := a.q.apply(h, P)
	k := a.k.apply(h, P)
	v := a.v.apply(h, P)
	o := make([]float32, P*C)
	attention(o, C, q, C, k, C, v, C, P, P, C, float32(1/math.Sqrt(float64(C))))
	out := a.o.apply(o, P)
	kernel.Add(out, x)
	return out
}

// Decode turns latents z [latent_channels, h, w] (already unscaled:
// z/scaling_factor + shift_factor) into the decoder's raw output
// [out_channels, h·s, w·s] (about [-1, 1]).
func (v *VAE) Decode(z []float32, h, w int) ([]float32, error) {
	c := v.Config
	if len(z) != c.LatentChannels*h*w {
		return nil, fmt.Errorf("vae: latents of %d values, want %d×%d×%d", len(z), c.LatentChannels, h, w)
	}
	// CHW to HWC.
	x := make([]float32, h*w*c.LatentChannels)
	for ch := range c.LatentChannels {
		for p := range h * w {
			x[p*c.LatentChannels+ch] = z[ch*h*w+p]
		}
	}
	H, W := h, w
	if v.postQuantConv != nil {
		x = v.postQuantConv.apply(x, H, W)
	}
	x = v.convIn.apply(x, H, W)
	x = v.mid1.apply(x, H, W, v.groups)
	if v.midAttn != nil {
		x = v.midAttn.apply(x, H, W, v.groups)
	}
	x = v.mid2.apply(x, H, W, v.groups)
	for _, b := range v.up {
		for _, r := range b.resnets {
			x = r.apply(x, H, W, v.groups)
		}
		if b.upsample != nil {
			x = upsample2x(x, H, W, b.upsample.in)
			H, W = 2*H, 2*W
			x = b.upsample.apply(x, H, W)
		}
	}
	C := c.BlockOutChannels[0]
	groupNorm(x, H*W, C, v.groups, v.normOut.w, v.normOut.b, vaeEps)
	silu(x)
	x = v.convOut.apply(x, H, W)
	// HWC to CHW.
	O := c.OutChannels
	out := make([]float32, O*H*W)
	for p := range H * W {
		for ch := range O {
			out[ch*H*W+p] = x[p*O+ch]
		}
	}
	return out, nil
}

// upsample2x is nearest-neighbour 2× upsampling of an HWC image.
func upsample2x(x []float32, H, W, C int) []float32 {
	out := make([]float32, 4*H*W*C)
	for y := range 2 * H {
		for xx := range 2 * W {
			copy(out[(y*2*W+xx)*C:(y*2*W+xx+1)*C], x[((y/2)*W+xx/2)*C:((y/2)*W+xx/2+1)*C])
		}
	}
	return out
}

// VAESpec is the decoder as plain float32 arrays, for a device backend:
// convolution weights [out, ky, kx, in] over HWC activations; the mid
// attention's projections as 1×1 convolutions.
type VAESpec struct {
	Groups         int
	Eps            float32
	LatentChannels int
	OutChannels    int
	PostQuantConv  *ConvSpec
	ConvIn         ConvSpec
	Mid1, Mid2     ResnetSpec
	MidAttn        *AttnSpec
	Up             []UpSpec
	NormOut        NormSpec
	ConvOut        ConvSpec
}

// ConvSpec is a k×k convolution (stride 1, padding k/2).
type ConvSpec struct {
	W, B       []float32
	K, In, Out int
}

// NormSpec is a group norm's affine weight and bias.
type NormSpec struct{ W, B []float32 }

// ResnetSpec is a ResnetBlock2D: norm1, SiLU, conv1, norm2, SiLU, conv2,
// plus the input (through Shortcut when the widths differ).
type ResnetSpec struct {
	Norm1, Norm2 NormSpec
	Conv1, Conv2 ConvSpec
	Shortcut     *ConvSpec
}

// AttnSpec is the mid block's single-head attention with its residual.
type AttnSpec struct {
	Norm       NormSpec
	Q, K, V, O ConvSpec
}

// UpSpec is one up block: its resnets, then (but for the last) nearest 2×
// upsampling and a 3×3 convolution.
type UpSpec struct {
	Resnets  []ResnetSpec
	Upsample *ConvSpec
}

// Spec describes the decoder for a device backend.
func (v *VAE) Spec() (*VAESpec, error) {
	conv := func(c *conv2d) ConvSpec { return ConvSpec{W: c.wf, B: c.w.b, K: c.k, In: c.in, Out: c.out} }
	convp := func(c *conv2d) *ConvSpec {
		if c == nil {
			return nil
		}
		s := conv(c)
		return &s
	}
	res := func(r *resnet) ResnetSpec {
		return ResnetSpec{Norm1: r.norm1.spec(), Norm2: r.norm2.spec(), Conv1: conv(r.conv1), Conv2: conv(r.conv2), Shortcut: convp(r.shortcut)}
	}
	s := &VAESpec{Groups: v.groups, Eps: vaeEps, LatentChannels: v.Config.LatentChannels, OutChannels: v.Config.OutChannels,
		PostQuantConv: convp(v.postQuantConv), ConvIn: conv(v.convIn), Mid1: res(v.mid1), Mid2: res(v.mid2),
		NormOut: v.normOut.spec(), ConvOut: conv(v.convOut)}
	if a := v.midAttn; a != nil {
		lin := func(l *linear) (ConvSpec, error) {
			w := make([]float32, l.out*l.in)
			if err := tensor.Dequantize(w, l.w.Codec, l.w.Data); err != nil {
				return ConvSpec{}, err
			}
			return ConvSpec{W: w, B: l.b, K: 1, In: l.in, Out: l.out}, nil
		}
		as := &AttnSpec{Norm: a.norm.spec()}
		var err error
		for _, x := range []struct {
			dst *ConvSpec
			l   *linear
		}{{&as.Q, a.q}, {&as.K, a.k}, {&as.V, a.v}, {&as.O, a.o}} {
			if *x.dst, err = lin(x.l); err != nil {
				return nil, fmt.Errorf("vae: mid attention %s: %w", x.l.name, err)
			}
		}
		s.MidAttn = as
	}
	for _, b := range v.up {
		u := UpSpec{Upsample: convp(b.upsample)}
		for _, r := range b.resnets {
			u.Resnets = append(u.Resnets, res(r))
		}
		s.Up = append(s.Up, u)
	}
	return s, nil
}

package diffusion

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/tensor"
)

// DiTConfig is the transformer's config.json (diffusers'
// ZImageTransformer2DModel arguments).
type DiTConfig struct {
	PatchSizes    []int   `json:"all_patch_size"`
	FPatchSizes   []int   `json:"all_f_patch_size"`
	InChannels    int     `json:"in_channels"`
	Dim           int     `json:"dim"`
	Layers        int     `json:"n_layers"`
	RefinerLayers int     `json:"n_refiner_layers"`
	Heads         int     `json:"n_heads"`
	KVHeads       int     `json:"n_kv_heads"`
	NormEps       float32 `json:"norm_eps"`
	QKNorm        bool    `json:"qk_norm"`
	CapFeatDim    int     `json:"cap_feat_dim"`
	SiglipFeatDim *int    `json:"siglip_feat_dim"`
	RopeTheta     float64 `json:"rope_theta"`
	TScale        float32 `json:"t_scale"`
	AxesDims      []int   `json:"axes_dims"`
	AxesLens      []int   `json:"axes_lens"`
}

// isDiTConfig tells a Z-Image transformer config from other components'
// by its contents.
func isDiTConfig(raw map[string]json.RawMessage) bool {
	_, a := raw["cap_feat_dim"]
	_, b := raw["axes_dims"]
	_, c := raw["n_refiner_layers"]
	return a && b && c
}

func parseDiTConfig(b []byte) (DiTConfig, error) {
	c := DiTConfig{ // diffusers' defaults
		PatchSizes: []int{2}, FPatchSizes: []int{1}, InChannels: 16, Dim: 3840, Layers: 30,
		RefinerLayers: 2, Heads: 30, KVHeads: 30, NormEps: 1e-5, QKNorm: true, CapFeatDim: 2560,
		RopeTheta: 256, TScale: 1000, AxesDims: []int{32, 48, 48}, AxesLens: []int{1024, 512, 512},
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, err
	}
	switch {
	case c.Dim <= 0 || c.Heads <= 0 || c.Dim%c.Heads != 0:
		return c, fmt.Errorf("dim %d is not a positive multiple of n_heads %d", c.Dim, c.Heads)
	case len(c.AxesDims) != 3 || len(c.AxesLens) != 3:
		return c, fmt.Errorf("axes_dims %v and axes_lens %v must have 3 entries", c.AxesDims, c.AxesLens)
	case c.AxesDims[0]+c.AxesDims[1]+c.AxesDims[2] != c.Dim/c.Heads:
		return c, fmt.Errorf("axes_dims %v do not add up to the head dimension %d", c.AxesDims, c.Dim/c.Heads)
	case c.InChannels <= 0 || c.CapFeatDim <= 0 || c.Layers < 0 || c.RefinerLayers < 0:
		return c, fmt.Errorf("in_channels %d, cap_feat_dim %d, n_layers %d, n_refiner_layers %d", c.InChannels, c.CapFeatDim, c.Layers, c.RefinerLayers)
	case c.SiglipFeatDim != nil:
		return c, fmt.Errorf("siglip_feat_dim is set: the Omni variant (image conditioning) is not supported")
	}
	for i, d := range c.AxesDims {
		if d%2 != 0 || d <= 0 {
			return c, fmt.Errorf("axes_dims %v: each must be even and positive", c.AxesDims)
		}
		if l := c.AxesLens[i]; l <= 0 || l > 1<<16 {
			return c, fmt.Errorf("axes_lens %v: each must be in 1..65536", c.AxesLens)
		}
	}
	if c.RopeTheta <= 0 || c.NormEps <= 0 {
		return c, fmt.Errorf("rope_theta %g and norm_eps %g must be positive", c.RopeTheta, c.NormEps)
	}
	found := false
	for i, p := range c.PatchSizes {
		if p == 2 && i < len(c.FPatchSizes) && c.FPatchSizes[i] == 1 {
			found = true
		}
	}
	if !found {
		return c, fmt.Errorf("all_patch_size %v / all_f_patch_size %v have no 2x2 (frame 1) patch", c.PatchSizes, c.FPatchSizes)
	}
	return c, nil
}

const (
	seqMultiple  = 32   // diffusers' SEQ_MULTI_OF: sequences padded to a multiple
	tEmbFreqDim  = 256  // frequency embedding size of the timestep embedder
	adaLNMaxDim  = 256  // ADALN_EMBED_DIM
	patch        = 2    // spatial patch size
	tMaxPeriod   = 1e4  // timestep embedding max period
	finalNormEps = 1e-6 // FinalLayer's LayerNorm
	qkNormEps    = 1e-5 // the attention's q/k RMS norms (fixed, whatever norm_eps says)
)

// ditBlock is one ZImageTransformerBlock.
type ditBlock struct {
	q, k, v, o       *linear
	qNorm, kNorm     []float32 // [headDim], nil without qk_norm
	attnNorm1        []float32
	attnNorm2        []float32
	ffnNorm1         []float32
	ffnNorm2         []float32
	w1, w2, w3       *linear
	adaLN            *linear // nil: no modulation (context refiner)
	dim, heads, hdim int
	ffn              int
	eps              float32
}

// DiT is a loaded ZImageTransformer2DModel.
type DiT struct {
	Config DiTConfig

	adaDim       int // width of the timestep embedding (min(dim, 256))
	tMLP1, tMLP2 *linear
	xEmbed       *linear
	capNorm      []float32
	capEmbed     *linear
	xPad, capPad []float32
	noiseRefiner []*ditBlock
	ctxRefiner   []*ditBlock
	layers       []*ditBlock
	finalAdaLN   *linear
	finalLinear  *linear
	rope         [3][]float32 // per axis: [axes_lens, axes_dims] as (cos, sin) pairs
	headDim      int
	patchDim     int
	tMidDim      int
	inChannels   int
	hiddenFFN    int
	eps          float32
	dim          int
	heads        int
	capFeatDim   int
	device       DiTDevice
}

func loadDiT(w *weights, c DiTConfig) (*DiT, error) {
	d := &DiT{Config: c, dim: c.Dim, heads: c.Heads, headDim: c.Dim / c.Heads, eps: c.NormEps,
		inChannels: c.InChannels, capFeatDim: c.CapFeatDim}
	d.adaDim = min(c.Dim, adaLNMaxDim)
	d.patchDim = patch * patch * c.InChannels
	d.hiddenFFN = int(float64(c.Dim) / 3 * 8)
	var err error
	// The embedder's middle width is 1024 in diffusers; read it from the weights.
	t1, err := w.tensor("t_embedder.mlp.0.weight")
	if err == nil && len(t1.Shape) == 2 && t1.Shape[1] == tEmbFreqDim {
		d.tMidDim = t1.Shape[0]
	} else if err == nil {
		return nil, fmt.Errorf("%s: t_embedder.mlp.0.weight has shape %v, want [mid, %d]", w.dir, t1.Shape, tEmbFreqDim)
	} else {
		return nil, err
	}
	must := func(l *linear, e error) *linear {
		if e != nil && err == nil {
			err = e
		}
		return l
	}
	vec := func(name string, n ...int) []float32 {
		v, e := w.floats(name, n...)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	d.tMLP1 = must(w.linear("t_embedder.mlp.0", d.tMidDim, tEmbFreqDim, true))
	d.tMLP2 = must(w.linear("t_embedder.mlp.2", d.adaDim, d.tMidDim, true))
	d.xEmbed = must(w.linear("all_x_embedder.2-1", c.Dim, d.patchDim, true))
	d.capNorm = vec("cap_embedder.0.weight", c.CapFeatDim)
	d.capEmbed = must(w.linear("cap_embedder.1", c.Dim, c.CapFeatDim, true))
	d.xPad = vec("x_pad_token", 1, c.Dim)
	d.capPad = vec("cap_pad_token", 1, c.Dim)
	d.finalAdaLN = must(w.linear("all_final_layer.2-1.adaLN_modulation.1", c.Dim, d.adaDim, true))
	d.finalLinear = must(w.linear("all_final_layer.2-1.linear", d.patchDim, c.Dim, true))
	if err != nil {
		return nil, err
	}
	block := func(prefix string, modulated bool) (*ditBlock, error) {
		b := &ditBlock{dim: c.Dim, heads: c.Heads, hdim: d.headDim, ffn: d.hiddenFFN, eps: c.NormEps}
		var err error
		must := func(l *linear, e error) *linear {
			if e != nil && err == nil {
				err = e
			}
			return l
		}
		vec := func(name string, n ...int) []float32 {
			v, e := w.floats(name, n...)
			if e != nil && err == nil {
				err = e
			}
			return v
		}
		b.q = must(w.qlinear(prefix+"attention.to_q", c.Dim, c.Dim, false))
		b.k = must(w.qlinear(prefix+"attention.to_k", c.Dim, c.Dim, false))
		b.v = must(w.qlinear(prefix+"attention.to_v", c.Dim, c.Dim, false))
		b.o = must(w.qlinear(prefix+"attention.to_out.0", c.Dim, c.Dim, false))
		if c.QKNorm {
			b.qNorm = vec(prefix+"attention.norm_q.weight", d.headDim)
			b.kNorm = vec(prefix+"attention.norm_k.weight", d.headDim)
		}
		b.attnNorm1 = vec(prefix+"attention_norm1.weight", c.Dim)
		b.attnNorm2 = vec(prefix+"attention_norm2.weight", c.Dim)
		b.ffnNorm1 = vec(prefix+"ffn_norm1.weight", c.Dim)
		b.ffnNorm2 = vec(prefix+"ffn_norm2.weight", c.Dim)
		b.w1 = must(w.qlinear(prefix+"feed_forward.w1", d.hiddenFFN, c.Dim, false))
		b.w2 = must(w.qlinear(prefix+"feed_forward.w2", c.Dim, d.hiddenFFN, false))
		b.w3 = must(w.qlinear(prefix+"feed_forward.w3", d.hiddenFFN, c.Dim, false))
		if modulated {
			b.adaLN = must(w.qlinear(prefix+"adaLN_modulation.0", 4*c.Dim, d.adaDim, true))
		}
		return b, err
	}
	for i := range c.RefinerLayers {
		b, err := block(fmt.Sprintf("noise_refiner.%d.", i), true)
		if err != nil {
			return nil, err
		}
		d.noiseRefiner = append(d.noiseRefiner, b)
		if b, err = block(fmt.Sprintf("context_refiner.%d.", i), false); err != nil {
			return nil, err
		}
		d.ctxRefiner = append(d.ctxRefiner, b)
	}
	for i := range c.Layers {
		b, err := block(fmt.Sprintf("layers.%d.", i), true)
		if err != nil {
			return nil, err
		}
		d.layers = append(d.layers, b)
	}
	for _, name := range w.set.Names() {
		if !w.used[name] {
			return nil, fmt.Errorf("%s: tensor %q is not part of a Z-Image transformer of this config", w.dir, name)
		}
	}
	// RoPE tables as diffusers builds them: angle pos·θ^(-2i/d) in float64,
	// rounded to float32, then cos and sin of the float32 angle.
	for ax := range 3 {
		dim, n := c.AxesDims[ax], c.AxesLens[ax]
		t := make([]float32, n*dim)
		for p := range n {
			for i := range dim / 2 {
				f := 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(dim))
				a := float64(float32(float64(p) * f))
				t[p*dim+2*i] = float32(math.Cos(a))
				t[p*dim+2*i+1] = float32(math.Sin(a))
			}
		}
		d.rope[ax] = t
	}
	return d, nil
}

// roundUp rounds n up to a multiple of seqMultiple.
func roundUp(n int) int { return (n + seqMultiple - 1) / seqMultiple * seqMultiple }

// CheckSizes reports whether a latent of h×w and a caption of capRows rows
// fit the RoPE tables (axes_lens).
func (d *DiT) CheckSizes(h, w, capRows int) error {
	c := d.Config
	if h%patch != 0 || w%patch != 0 || h <= 0 || w <= 0 {
		return fmt.Errorf("latent %dx%d is not a positive multiple of the %d×%d patch", h, w, patch, patch)
	}
	if capRows <= 0 {
		return fmt.Errorf("caption of %d rows", capRows)
	}
	if p := roundUp(capRows) + 1; p >= c.AxesLens[0] {
		return fmt.Errorf("caption of %d tokens needs position %d, beyond the transformer's axes_lens[0] = %d", capRows, p, c.AxesLens[0])
	}
	if h/patch > c.AxesLens[1] || w/patch > c.AxesLens[2] {
		return fmt.Errorf("latent %dx%d has %dx%d patches, beyond axes_lens %v", h, w, h/patch, w/patch, c.AxesLens[1:])
	}
	return nil
}

// TimestepEmbedding is the adaLN input for t (diffusers' t_embedder of
// t·t_scale): [adaDim].
func (d *DiT) TimestepEmbedding(t float32) []float32 {
	tt := t * d.Config.TScale
	const half = tEmbFreqDim / 2
	f := make([]float32, tEmbFreqDim)
	negLog := float32(-math.Log(tMaxPeriod))
	for i := range half {
		freq := float32(math.Exp(float64(negLog * float32(i) / half)))
		a := float64(tt * freq)
		f[i] = float32(math.Cos(a))
		f[half+i] = float32(math.Sin(a))
	}
	h := d.tMLP1.apply(f, 1)
	silu(h)
	return d.tMLP2.apply(h, 1)
}

// Forward is one transformer evaluation: latents x [C, H, W] (one frame),
// t in [0, 1] (diffusers' (1000 - timestep)/1000) and caption features cap
// [capRows, cap_feat_dim]; it returns the model output [C, H, W].
func (d *DiT) Forward(x []float32, H, W int, t float32, cap []float32, capRows int) ([]float32, error) {
	ys, err := d.ForwardBatch(x, H, W, t, [][]float32{cap}, []int{capRows})
	if err != nil {
		return nil, err
	}
	return ys[0], nil
}

// ForwardBatch evaluates the transformer on the same latents and timestep
// for several captions (classifier-free guidance: the prompt's and the
// negative prompt's), one output per caption. Each output is Forward's
// for that caption exactly; a device implementing DiTBatchDevice runs
// them as one batch (one submission), else they run one after the other.
func (d *DiT) ForwardBatch(x []float32, H, W int, t float32, caps [][]float32, capRows []int) ([][]float32, error) {
	C := d.inChannels
	if len(x) != C*H*W {
		return nil, fmt.Errorf("dit: latents of %d values, want %d×%d×%d", len(x), C, H, W)
	}
	if len(caps) == 0 || len(caps) != len(capRows) {
		return nil, fmt.Errorf("dit: %d captions with %d row counts", len(caps), len(capRows))
	}
	ins := make([]*DiTInput, len(caps))
	for i, cap := range caps {
		if len(cap) != capRows[i]*d.capFeatDim {
			return nil, fmt.Errorf("dit: caption of %d values, want %d×%d", len(cap), capRows[i], d.capFeatDim)
		}
		if err := d.CheckSizes(H, W, capRows[i]); err != nil {
			return nil, fmt.Errorf("dit: %w", err)
		}
		ins[i] = d.Prepare(x, H, W, t, cap, capRows[i])
	}
	var ys [][]float32
	if bd, ok := d.device.(DiTBatchDevice); ok && len(ins) > 1 {
		var err error
		if ys, err = bd.RunBatch(ins); err != nil {
			return nil, err
		}
		if len(ys) != len(ins) {
			return nil, fmt.Errorf("dit: the device returned %d outputs for a batch of %d", len(ys), len(ins))
		}
	} else {
		for _, in := range ins {
			if d.device == nil {
				ys = append(ys, d.Run(in))
				continue
			}
			y, err := d.device.Run(in)
			if err != nil {
				return nil, err
			}
			ys = append(ys, y)
		}
	}
	for i, y := range ys {
		ys[i] = d.unpatchify(y, H, W)
	}
	return ys, nil
}

// unpatchify turns the final layer's rows [H/2·W/2, 4·C] into [C, H, W].
func (d *DiT) unpatchify(y []float32, H, W int) []float32 {
	C := d.inChannels
	Ht, Wt := H/patch, W/patch
	res := make([]float32, C*H*W)
	for h := range Ht {
		for w := range Wt {
			row := y[(h*Wt+w)*d.patchDim:]
			for ph := range patch {
				for pw := range patch {
					for c := range C {
						res[c*H*W+(h*patch+ph)*W+w*patch+pw] = row[(ph*patch+pw)*C+c]
					}
				}
			}
		}
	}
	return res
}

// DiTInput is one transformer evaluation after the embedders: what the
// blocks and the final layer need.
type DiTInput struct {
	// Img are the image rows [ImgRows, dim]: NImg embedded patches, then
	// pad tokens up to a multiple of 32. Cap are the caption rows
	// [CapRows, dim], pads included.
	Img           []float32
	ImgRows, NImg int
	Cap           []float32
	CapRows       int
	// ImgRope and CapRope are each row's rotation [rows, head_dim]: (cos,
	// sin) per pair of a head vector.
	ImgRope, CapRope []float32
	// NoiseMod and LayerMod are the modulated blocks' vectors [4·dim]:
	// 1+scale_msa, tanh(gate_msa), 1+scale_mlp, tanh(gate_mlp).
	NoiseMod, LayerMod [][]float32
	// FinalScale is the final layer's 1+scale [dim].
	FinalScale []float32
}

// DiTDevice runs the blocks and the final layer elsewhere (a device):
// noise refiners on the image rows, context refiners on the caption rows,
// the layers on [image rows, caption rows], the final layer on the first
// NImg rows, returned as [NImg, 4·in_channels].
type DiTDevice interface {
	Run(in *DiTInput) ([]float32, error)
}

// DiTBatchDevice is a DiTDevice that also runs several inputs of one
// timestep (the same modulation vectors; captions and so row counts may
// differ) as one batch, each output exactly its Run's.
type DiTBatchDevice interface {
	DiTDevice
	RunBatch(ins []*DiTInput) ([][]float32, error)
}

// DiTTrimmer is a DiTDevice that keeps resources for the next evaluation
// of the same shape (a recorded step's buffers); Trim releases them. A
// generation trims its device when it ends.
type DiTTrimmer interface {
	DiTDevice
	Trim()
}

// SetDevice makes Forward run the blocks on dev (nil: the CPU).
func (d *DiT) SetDevice(dev DiTDevice) { d.device = dev }

// Prepare runs the CPU side of a forward: timestep embedding and
// modulation vectors, patchify and the embedders, pad rows, RoPE rows.
func (d *DiT) Prepare(x []float32, H, W int, t float32, cap []float32, capRows int) *DiTInput {
	C, D := d.inChannels, d.dim
	temb := d.TimestepEmbedding(t)

	// Patchify: token (h, w) holds x[c, 2h+ph, 2w+pw] at (ph·2 + pw)·C + c.
	Ht, Wt := H/patch, W/patch
	nImg := Ht * Wt
	imgRows, capPadRows := roundUp(nImg), roundUp(capRows)
	patches := make([]float32, nImg*d.patchDim)
	for h := range Ht {
		for w := range Wt {
			row := patches[(h*Wt+w)*d.patchDim:]
			for ph := range patch {
				for pw := range patch {
					for c := range C {
						row[(ph*patch+pw)*C+c] = x[c*H*W+(h*patch+ph)*W+w*patch+pw]
					}
				}
			}
		}
	}
	in := &DiTInput{ImgRows: imgRows, NImg: nImg, CapRows: capPadRows}

	// Image rows: embedded patches, then pad tokens up to a multiple of 32.
	// Positions (capPad+1, h, w); pad rows sit at (0, 0, 0).
	in.Img = make([]float32, imgRows*D)
	copy(in.Img, d.xEmbed.apply(patches, nImg))
	for r := nImg; r < imgRows; r++ {
		copy(in.Img[r*D:(r+1)*D], d.xPad)
	}
	imgPos := make([][3]int, imgRows)
	for h := range Ht {
		for w := range Wt {
			imgPos[h*Wt+w] = [3]int{capPadRows + 1, h, w}
		}
	}
	in.ImgRope = d.ropeRows(imgPos)

	// Caption rows: RMS-normed features, embedded, pad tokens to a
	// multiple of 32; positions (1+j, 0, 0) for every row, pads included.
	capIn := append([]float32(nil), cap...)
	rmsNormRows(capIn, capRows, d.capFeatDim, d.capNorm, d.eps)
	in.Cap = make([]float32, capPadRows*D)
	copy(in.Cap, d.capEmbed.apply(capIn, capRows))
	for r := capRows; r < capPadRows; r++ {
		copy(in.Cap[r*D:(r+1)*D], d.capPad)
	}
	capPos := make([][3]int, capPadRows)
	for j := range capPadRows {
		capPos[j] = [3]int{1 + j, 0, 0}
	}
	in.CapRope = d.ropeRows(capPos)

	for _, b := range d.noiseRefiner {
		in.NoiseMod = append(in.NoiseMod, b.modulation(temb))
	}
	for _, b := range d.layers {
		in.LayerMod = append(in.LayerMod, b.modulation(temb))
	}
	st := append([]float32(nil), temb...)
	silu(st)
	in.FinalScale = d.finalAdaLN.apply(st, 1)
	for i := range in.FinalScale {
		in.FinalScale[i] += 1
	}
	return in
}

// ropeRows gathers each position's (cos, sin) pairs for a head vector: the
// first axes_dims[0]/2 pairs turn by axis 0's angle, then axis 1's, then
// axis 2's.
func (d *DiT) ropeRows(pos [][3]int) []float32 {
	hd := d.headDim
	out := make([]float32, len(pos)*hd)
	for r, p := range pos {
		off := 0
		for ax := range 3 {
			dim := d.Config.AxesDims[ax]
			copy(out[r*hd+off:r*hd+off+dim], d.rope[ax][p[ax]*dim:(p[ax]+1)*dim])
			off += dim
		}
	}
	return out
}

// modulation is a modulated block's [4·dim] vector for temb.
func (b *ditBlock) modulation(temb []float32) []float32 {
	D := b.dim
	mod := b.adaLN.apply(temb, 1)
	for i := range D {
		mod[i] += 1
		mod[D+i] = float32(math.Tanh(float64(mod[D+i])))
		mod[2*D+i] += 1
		mod[3*D+i] = float32(math.Tanh(float64(mod[3*D+i])))
	}
	return mod
}

// Run is the CPU reference of the blocks and the final layer (see
// DiTDevice).
func (d *DiT) Run(in *DiTInput) []float32 {
	D := d.dim
	img := append([]float32(nil), in.Img...)
	for i, b := range d.noiseRefiner {
		d.block(b, img, in.ImgRows, in.ImgRope, in.NoiseMod[i])
	}
	capX := append([]float32(nil), in.Cap...)
	for _, b := range d.ctxRefiner {
		d.block(b, capX, in.CapRows, in.CapRope, nil)
	}
	// One stream: [image rows, caption rows].
	n := in.ImgRows + in.CapRows
	u := append(img, capX...)
	rope := append(append([]float32(nil), in.ImgRope...), in.CapRope...)
	for i, b := range d.layers {
		d.block(b, u, n, rope, in.LayerMod[i])
	}
	// Final layer on the image rows: LayerNorm·(1 + scale), linear.
	out := u[:in.NImg*D]
	layerNormRows(out, in.NImg, D, finalNormEps)
	mulRows(out, in.NImg, D, in.FinalScale)
	return d.finalLinear.apply(out, in.NImg)
}

// block runs one transformer block over n rows of x [n, dim] in place.
// mod is the modulation vector (nil for an unmodulated block):
//
//	x += tanh(g₁)·norm₂(attn(norm₁(x)·(1+s₁)))
//	x += tanh(g₂)·norm₂′(ffn(norm₁′(x)·(1+s₂)))
func (d *DiT) block(b *ditBlock, x []float32, n int, rope []float32, mod []float32) {
	D := b.dim
	var scaleMSA, gateMSA, scaleMLP, gateMLP []float32
	if mod != nil {
		scaleMSA, gateMSA, scaleMLP, gateMLP = mod[:D], mod[D:2*D], mod[2*D:3*D], mod[3*D:]
	}
	h := append([]float32(nil), x[:n*D]...)
	rmsNormRows(h, n, D, b.attnNorm1, b.eps)
	mulRows(h, n, D, scaleMSA)
	a := d.attention(b, h, n, rope)
	rmsNormRows(a, n, D, b.attnNorm2, b.eps)
	addGated(x, a, n, D, gateMSA)

	copy(h, x[:n*D])
	rmsNormRows(h, n, D, b.ffnNorm1, b.eps)
	mulRows(h, n, D, scaleMLP)
	g := b.w1.apply(h, n)
	u := b.w3.apply(h, n)
	silu(g)
	kernel.Mul(g, u)
	f := b.w2.apply(g, n)
	rmsNormRows(f, n, D, b.ffnNorm2, b.eps)
	addGated(x, f, n, D, gateMLP)
}

// mulRows multiplies every row by s (nil: no-op).
func mulRows(x []float32, n, D int, s []float32) {
	if s == nil {
		return
	}
	for t := range n {
		kernel.Mul(x[t*D:(t+1)*D], s)
	}
}

// addGated adds g⊙y to every row of x (g nil: plain residual).
func addGated(x, y []float32, n, D int, g []float32) {
	for t := range n {
		xr, yr := x[t*D:(t+1)*D], y[t*D:(t+1)*D]
		if g == nil {
			kernel.Add(xr, yr)
			continue
		}
		for i := range D {
			xr[i] += g[i] * yr[i]
		}
	}
}

// attention is the joint self-attention of a block: q, k, v projections,
// per-head RMS norm of q and k, RoPE (each row's (cos, sin) pairs), softmax
// attention over all n rows, output projection.
func (d *DiT) attention(b *ditBlock, h []float32, n int, rope []float32) []float32 {
	D, hd := b.dim, b.hdim
	q := b.q.apply(h, n)
	k := b.k.apply(h, n)
	v := b.v.apply(h, n)
	parallel(n, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			cs := rope[t*hd : (t+1)*hd]
			for hh := range b.heads {
				qr := q[t*D+hh*hd : t*D+(hh+1)*hd]
				kr := k[t*D+hh*hd : t*D+(hh+1)*hd]
				if b.qNorm != nil {
					kernel.RMSNorm(qr, qr, b.qNorm, qkNormEps, false)
					kernel.RMSNorm(kr, kr, b.kNorm, qkNormEps, false)
				}
				rotate(qr, cs)
				rotate(kr, cs)
			}
		}
	})
	out := make([]float32, n*D)
	scale := float32(1 / math.Sqrt(float64(hd)))
	for hh := range b.heads {
		o := hh * hd
		attention(out[o:], D, q[o:], D, k[o:], D, v[o:], D, n, n, hd, scale)
	}
	return b.o.apply(out, n)
}

// rotate turns the pairs (2i, 2i+1) of a head vector, as complex
// numbers, by the angles whose (cos, sin) are cs[2i], cs[2i+1].
func rotate(x, cs []float32) {
	for i := 0; i < len(x); i += 2 {
		c, s := cs[i], cs[i+1]
		a, b := x[i], x[i+1]
		x[i] = a*c - b*s
		x[i+1] = a*s + b*c
	}
}

// DiTSpec is the transformer's blocks and final layer as float32 arrays,
// for a device backend (linear weights [out, in]).
type DiTSpec struct {
	Dim, Heads, HeadDim, FFN, PatchDim int
	Eps, QKEps, FinalEps               float32
	NoiseRefiner, ContextRefiner       []BlockSpec
	Layers                             []BlockSpec
	FinalW, FinalB                     []float32 // [PatchDim, Dim], [PatchDim]
}

// BlockSpec is one transformer block's weights.
type BlockSpec struct {
	Q, K, V, O           []float32 // [Dim, Dim]
	QNorm, KNorm         []float32 // [HeadDim], nil without qk_norm
	AttnNorm1, AttnNorm2 []float32 // [Dim]
	FFNNorm1, FFNNorm2   []float32 // [Dim]
	W1, W3               []float32 // [FFN, Dim]
	W2                   []float32 // [Dim, FFN]
}

// Spec describes the blocks and final layer for a device backend (weights
// decoded to float32).
func (d *DiT) Spec() (*DiTSpec, error) {
	var err error
	f := func(l *linear) []float32 {
		if err != nil {
			return nil
		}
		w := make([]float32, l.out*l.in)
		err = tensor.Dequantize(w, l.w.Codec, l.w.Data)
		return w
	}
	block := func(b *ditBlock) BlockSpec {
		return BlockSpec{Q: f(b.q), K: f(b.k), V: f(b.v), O: f(b.o), QNorm: b.qNorm, KNorm: b.kNorm,
			AttnNorm1: b.attnNorm1, AttnNorm2: b.attnNorm2, FFNNorm1: b.ffnNorm1, FFNNorm2: b.ffnNorm2,
			W1: f(b.w1), W2: f(b.w2), W3: f(b.w3)}
	}
	s := &DiTSpec{Dim: d.dim, Heads: d.heads, HeadDim: d.headDim, FFN: d.hiddenFFN, PatchDim: d.patchDim,
		Eps: d.eps, QKEps: qkNormEps, FinalEps: finalNormEps, FinalW: f(d.finalLinear), FinalB: d.finalLinear.b}
	for _, b := range d.noiseRefiner {
		s.NoiseRefiner = append(s.NoiseRefiner, block(b))
	}
	for _, b := range d.ctxRefiner {
		s.ContextRefiner = append(s.ContextRefiner, block(b))
	}
	for _, b := range d.layers {
		s.Layers = append(s.Layers, block(b))
	}
	if err != nil {
		return nil, fmt.Errorf("dit: %w", err)
	}
	return s, nil
}

package importer

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/model/family"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

type hfLoader struct {
	set    *safetensors.Set
	prefix string // "model." usually
	used   map[string]bool
	out    model.MapWeights
	// lazy: the set is not mapped, so tensors taken as they are (or as row
	// ranges) are read when used, through views; computed ones (banks,
	// permutations) are read now.
	lazy  bool
	views map[string]lazyView
}

func (h *hfLoader) fileOf(name string) string {
	if f, ok := h.set.File(name); ok {
		return f.Name()
	}
	return "checkpoint"
}

func (h *hfLoader) has(name string) bool { return h.set.Has(name) }

// get fetches a source tensor, data included, and checks its shape.
func (h *hfLoader) get(name string, shape ...int) (*tensor.Tensor, error) {
	t, err := h.head(name, shape...)
	if err != nil || t.Data != nil {
		return t, err
	}
	full, err := h.set.Tensor(name)
	if err != nil {
		return nil, err
	}
	t.Data = full.Data
	return t, nil
}

// head fetches a source tensor and checks its shape; its Data aliases the
// mapping, or is nil for a lazy loader (get reads it).
func (h *hfLoader) head(name string, shape ...int) (*tensor.Tensor, error) {
	if !h.set.Has(name) {
		return nil, fmt.Errorf("missing tensor %q (%s)", name, strings.Join(h.set.Paths(), ", "))
	}
	var t *tensor.Tensor
	if h.lazy {
		in, _ := h.set.Info(name)
		c, ok := in.DType.Codec()
		if !ok {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: dtype %s is not supported as a weight", h.fileOf(name), name, in.DType)
		}
		t = &tensor.Tensor{Name: name, Codec: c, Shape: slices.Clone(in.Shape)}
	} else {
		var err error
		if t, err = h.set.Tensor(name); err != nil {
			return nil, err
		}
	}
	if t.Codec == tensor.I32 {
		return nil, fmt.Errorf("%s: tensor %q: integer dtype is not a weight", h.fileOf(name), name)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, config implies %v", h.fileOf(name), name, t.Shape, shape)
	}
	h.used[name] = true
	return t, nil
}

// take maps a required source tensor to a canonical name.
func (h *hfLoader) take(src, canon string, shape ...int) error {
	t, err := h.head(src, shape...)
	if err != nil {
		return err
	}
	if h.lazy {
		n, err := tensor.ByteLen(t.Codec, t.Shape)
		if err != nil {
			return fmt.Errorf("%s: tensor %q: %w", h.fileOf(src), src, err)
		}
		h.views[canon] = lazyView{src: src, n: int64(n)}
	}
	t.Name = canon
	h.out[canon] = t
	return nil
}

// takeOpt maps a source tensor when present.
func (h *hfLoader) takeOpt(src, canon string, shape ...int) (bool, error) {
	if !h.has(src) {
		return false, nil
	}
	return true, h.take(src, canon, shape...)
}

// reshape gives a kept tensor a new shape with the same element count.
func (h *hfLoader) reshape(canon string, shape ...int) {
	t := h.out[canon]
	t.Shape = shape
}

// split maps consecutive row ranges of a fused [sum(rows), cols] tensor to
// canonical names. The parts alias the source bytes.
func (h *hfLoader) split(src string, cols int, canon []string, rows []int) error {
	total := 0
	for _, r := range rows {
		total += r
	}
	t, err := h.head(src, total, cols)
	if err != nil {
		return err
	}
	rb, err := t.Codec.RowBytes(cols)
	if err != nil {
		return fmt.Errorf("%s: tensor %q: %w", h.fileOf(src), src, err)
	}
	r0 := 0
	for i, name := range canon {
		part := &tensor.Tensor{Name: name, Codec: t.Codec, Shape: []int{rows[i], cols}}
		if h.lazy {
			h.views[name] = lazyView{src: src, off: int64(r0 * rb), n: int64(rows[i] * rb)}
		} else {
			part.Data = t.Data[r0*rb : (r0+rows[i])*rb]
		}
		h.out[name] = part
		r0 += rows[i]
	}
	return nil
}

// bank packs per-expert [out, in] matrices into one [E, out, in] tensor.
func (h *hfLoader) bank(srcs []string, canon string, out, in int) error {
	var parts []*tensor.Tensor
	for _, s := range srcs {
		t, err := h.get(s, out, in)
		if err != nil {
			return err
		}
		if len(parts) > 0 && t.Codec != parts[0].Codec {
			return fmt.Errorf("%s: tensor %q is %s, expert 0 is %s", h.fileOf(s), s, t.Codec, parts[0].Codec)
		}
		parts = append(parts, t)
	}
	n := len(parts[0].Data)
	data := make([]byte, 0, n*len(parts))
	for _, p := range parts {
		data = append(data, p.Data...)
	}
	h.out[canon] = &tensor.Tensor{Name: canon, Codec: parts[0].Codec, Shape: []int{len(parts), out, in}, Data: data}
	return nil
}

// bankFused splits transformers-5 fused expert tensors gate_up_proj
// [E, 2*I, H] into gate and up banks.
func (h *hfLoader) bankFused(src string, gateCanon, upCanon string, experts, inter, hidden int) error {
	t, err := h.get(src, experts, 2*inter, hidden)
	if err != nil {
		return err
	}
	rb, err := t.Codec.RowBytes(hidden)
	if err != nil {
		return fmt.Errorf("%s: tensor %q: %w", h.fileOf(src), src, err)
	}
	half := inter * rb
	gate := make([]byte, 0, experts*half)
	up := make([]byte, 0, experts*half)
	for e := range experts {
		base := e * 2 * half
		gate = append(gate, t.Data[base:base+half]...)
		up = append(up, t.Data[base+half:base+2*half]...)
	}
	h.out[gateCanon] = &tensor.Tensor{Name: gateCanon, Codec: t.Codec, Shape: []int{experts, inter, hidden}, Data: gate}
	h.out[upCanon] = &tensor.Tensor{Name: upCanon, Codec: t.Codec, Shape: []int{experts, inter, hidden}, Data: up}
	return nil
}

// hfWeights maps the checkpoint's tensors to canonical names, checking every
// shape against the architecture. It also settles the choices only the
// weights can make: tied embeddings and which optional biases exist. The
// weights alias a mapped set; an unmapped set's are lazyWeights, read when
// used.
func hfWeights(c *hfConfig, a *model.Arch, set *safetensors.Set) (model.Weights, error) {
	h := &hfLoader{set: set, used: map[string]bool{}, out: model.MapWeights{}, lazy: !set.Mapped(), views: map[string]lazyView{}}
	for _, p := range []string{"model.", "model.language_model.", "language_model.model.", ""} {
		if set.Has(p + "embed_tokens.weight") {
			h.prefix = p
			break
		}
	}
	if h.prefix == "" && !set.Has("embed_tokens.weight") {
		return nil, fmt.Errorf("missing tensor \"model.embed_tokens.weight\" (%s)", strings.Join(set.Paths(), ", "))
	}
	P := h.prefix
	H := a.Hidden
	fam, ok := family.HF(a.Family)
	if !ok {
		return nil, fmt.Errorf("model_type %q is not supported", a.Family)
	}
	names := fam.Tensors.Names()
	if err := h.take(P+"embed_tokens.weight", model.TokenEmbd, a.Vocab, H); err != nil {
		return nil, err
	}
	if err := h.take(P+names.FinalNorm, model.OutputNorm, H); err != nil {
		return nil, err
	}
	head := "lm_head.weight"
	if !set.Has(head) && P != "model." && set.Has(strings.TrimSuffix(P, "model.")+"lm_head.weight") {
		head = strings.TrimSuffix(P, "model.") + "lm_head.weight"
	}
	if !set.Has(head) {
		a.TiedEmbeddings = true
	} else if a.TiedEmbeddings {
		h.used[head] = true // transformers ties and ignores the stored copy
	} else if err := h.take(head, model.Output, a.Vocab, H); err != nil {
		return nil, err
	}

	for i := range a.Layers {
		l := &a.Layers[i]
		src := fmt.Sprintf("%slayers.%d.", P, i)
		dst := func(s string) string { return model.LayerTensor(i, s) }
		wrap := func(err error) error { return fmt.Errorf("layer %d: %w", i, err) }

		// Norms.
		attnNorm, ffnNorm := src+names.AttnNorm, src+names.FFNNorm
		if l.PreMixerNorm {
			if err := h.take(attnNorm, dst(model.AttnNorm), H); err != nil {
				return nil, wrap(err)
			}
		}
		if l.PostMixerNorm {
			if err := h.take(src+"post_attention_layernorm.weight", dst(model.PostAttnNorm), H); err != nil {
				return nil, wrap(err)
			}
		}
		if l.PreFFNNorm {
			if err := h.take(ffnNorm, dst(model.FFNNorm), H); err != nil {
				return nil, wrap(err)
			}
		}
		if l.PostFFNNorm {
			if err := h.take(src+"post_feedforward_layernorm.weight", dst(model.PostFFNNorm), H); err != nil {
				return nil, wrap(err)
			}
		}

		// Mixer.
		var err error
		switch l.Mixer {
		case model.MixerAttention:
			err = h.attention(fam, &names, src, i, l.Attn, H)
		case model.MixerShortConv:
			err = h.shortConv(src, i, l.Conv, H)
		case model.MixerGatedDelta:
			err = h.gatedDelta(src, i, l.Delta, H)
		}
		if err != nil {
			return nil, wrap(err)
		}

		// FFN.
		switch l.FFN {
		case model.FFNDense:
			err = h.dense(&names, src, i, l.FFNHidden, H)
		case model.FFNMoE:
			err = h.moe(fam, &names, src, i, l.MoE, H)
		}
		if err != nil {
			return nil, wrap(err)
		}
	}

	// A tensor under a layer that nothing consumed means a config option
	// this importer does not model (a bias, a norm): refuse rather than run
	// a different network.
	var unused []string
	for _, n := range set.Names() {
		if h.used[n] || strings.HasSuffix(n, "rotary_emb.inv_freq") {
			continue
		}
		if strings.HasPrefix(n, P+"layers.") || n == P+"norm.weight" || n == P+"embedding_norm.weight" {
			unused = append(unused, n)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		if len(unused) > 5 {
			unused = append(unused[:5], fmt.Sprintf("... (%d in all)", len(unused)))
		}
		return nil, fmt.Errorf("tensors not understood for %s: %s", fam.HF, strings.Join(unused, ", "))
	}
	if h.lazy {
		label := "hf"
		if p := set.Paths(); len(p) > 0 {
			label += ": " + filepath.Dir(p[0])
		}
		return &lazyWeights{label: label, src: set, headers: h.out, views: h.views}, nil
	}
	return h.out, nil
}

func (h *hfLoader) attention(fam *family.Family, names *family.HFTensors, src string, i int, at *model.Attention, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	qRows := at.Heads * at.HeadDim
	if at.OutputGate {
		qRows *= 2
	}
	kvRows := at.KVHeads * at.HeadDim
	sa := src + "self_attn."
	if names.FusedQKV != "" {
		if err := h.split(src+names.FusedQKV, H, []string{dst(model.AttnQ), dst(model.AttnK), dst(model.AttnV)}, []int{qRows, kvRows, kvRows}); err != nil {
			return err
		}
	} else {
		if err := h.take(sa+"q_proj.weight", dst(model.AttnQ), qRows, H); err != nil {
			return err
		}
		if err := h.take(sa+"k_proj.weight", dst(model.AttnK), kvRows, H); err != nil {
			return err
		}
		if err := h.take(sa+"v_proj.weight", dst(model.AttnV), kvRows, H); err != nil {
			return err
		}
	}
	outName := src + names.AttnOut
	if err := h.take(outName, dst(model.AttnOut), H, at.Heads*at.HeadDim); err != nil {
		return err
	}
	// Biases: required where the family always has them, else whatever
	// the checkpoint holds (attention_bias).
	need := at.Bias
	at.Bias = false
	nb := 0
	for _, b := range []struct {
		src, dst string
		n        int
	}{{"q_proj.bias", model.AttnQBias, qRows}, {"k_proj.bias", model.AttnKBias, kvRows}, {"v_proj.bias", model.AttnVBias, kvRows}} {
		ok, err := h.takeOpt(sa+b.src, dst(b.dst), b.n)
		if err != nil {
			return err
		}
		if !ok && need {
			return fmt.Errorf("missing tensor %q (%s requires q/k/v biases)", sa+b.src, fam.HF)
		}
		if ok {
			nb++
		}
	}
	if nb != 0 && nb != 3 {
		return fmt.Errorf("%s: only some of q/k/v have biases", sa)
	}
	at.Bias = nb == 3
	outBias := strings.TrimSuffix(outName, ".weight") + ".bias"
	ok, err := h.takeOpt(outBias, dst(model.AttnOutBias), H)
	if err != nil {
		return err
	}
	at.OutBias = ok
	if at.Sinks {
		if err := h.take(sa+"sinks", dst(model.AttnSinks), at.Heads); err != nil {
			return err
		}
	}

	qn, kn := src+names.QNorm, src+names.KNorm
	switch at.QKNorm {
	case model.QKNormPerHead:
		if err := h.take(qn, dst(model.AttnQNorm), at.HeadDim); err != nil {
			return err
		}
		if err := h.take(kn, dst(model.AttnKNorm), at.HeadDim); err != nil {
			return err
		}
	case model.QKNormFull:
		if err := h.take(qn, dst(model.AttnQNorm), at.Heads*at.HeadDim); err != nil {
			return err
		}
		if err := h.take(kn, dst(model.AttnKNorm), kvRows); err != nil {
			return err
		}
	}
	return nil
}

func (h *hfLoader) dense(names *family.HFTensors, src string, i, ff, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	if names.FusedGateUp != "" {
		if err := h.split(src+names.FusedGateUp, H, []string{dst(model.FFNGate), dst(model.FFNUp)}, []int{ff, ff}); err != nil {
			return err
		}
	} else {
		if err := h.take(src+names.Gate, dst(model.FFNGate), ff, H); err != nil {
			return err
		}
		if err := h.take(src+names.Up, dst(model.FFNUp), ff, H); err != nil {
			return err
		}
	}
	return h.take(src+names.Down, dst(model.FFNDown), H, ff)
}

func (h *hfLoader) moe(fam *family.Family, names *family.HFTensors, src string, i int, m *model.MoE, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	E, I := m.Experts, m.ExpertHidden
	block := src + names.MoEBlock
	gateN, upN, downN := names.Experts[0], names.Experts[1], names.Experts[2]
	if fam.MoE == family.MoEGptOss {
		return h.gptOssExperts(block, i, m, H)
	}
	if err := h.take(block+"gate.weight", dst(model.FFNRouter), E, H); err != nil {
		return err
	}
	if h.has(block + "experts.gate_up_proj") {
		if err := h.bankFused(block+"experts.gate_up_proj", dst(model.FFNGateExps), dst(model.FFNUpExps), E, I, H); err != nil {
			return err
		}
		if err := h.take(block+"experts.down_proj", dst(model.FFNDownExps), E, H, I); err != nil {
			return err
		}
	} else {
		expertNames := func(w string) []string {
			s := make([]string, E)
			for e := range s {
				s[e] = fmt.Sprintf("%sexperts.%d.%s.weight", block, e, w)
			}
			return s
		}
		if err := h.bank(expertNames(gateN), dst(model.FFNGateExps), I, H); err != nil {
			return err
		}
		if err := h.bank(expertNames(upN), dst(model.FFNUpExps), I, H); err != nil {
			return err
		}
		if err := h.bank(expertNames(downN), dst(model.FFNDownExps), H, I); err != nil {
			return err
		}
	}
	if m.SharedHidden > 0 {
		S := m.SharedHidden
		if err := h.take(block+"shared_expert.gate_proj.weight", dst(model.FFNGateShexp), S, H); err != nil {
			return err
		}
		if err := h.take(block+"shared_expert.up_proj.weight", dst(model.FFNUpShexp), S, H); err != nil {
			return err
		}
		if err := h.take(block+"shared_expert.down_proj.weight", dst(model.FFNDownShexp), H, S); err != nil {
			return err
		}
		if m.SharedGate {
			if err := h.take(block+"shared_expert_gate.weight", dst(model.FFNShexpGate), 1, H); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *hfLoader) shortConv(src string, i int, sc *model.ShortConv, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	if err := h.take(src+"conv.conv.weight", dst(model.ShortConvWeight), H, 1, sc.Kernel); err != nil {
		return err
	}
	h.reshape(dst(model.ShortConvWeight), H, sc.Kernel)
	if err := h.take(src+"conv.in_proj.weight", dst(model.ShortConvIn), 3*H, H); err != nil {
		return err
	}
	if err := h.take(src+"conv.out_proj.weight", dst(model.ShortConvOut), H, H); err != nil {
		return err
	}
	for _, b := range []struct {
		src, dst string
		n        int
	}{{"conv.conv.bias", model.ShortConvBias, H}, {"conv.in_proj.bias", model.ShortConvInBias, 3 * H}, {"conv.out_proj.bias", model.ShortConvOutB, H}} {
		if _, err := h.takeOpt(src+b.src, dst(b.dst), b.n); err != nil {
			return err
		}
	}
	return nil
}

func (h *hfLoader) gatedDelta(src string, i int, d *model.GatedDelta, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	la := src + "linear_attn."
	kd, vd := d.KeyHeads*d.KeyDim, d.ValueHeads*d.ValueDim
	conv := 2*kd + vd
	if err := h.take(la+"in_proj_qkvz.weight", dst(model.DeltaQKVZ), 2*kd+2*vd, H); err != nil {
		return err
	}
	if err := h.take(la+"in_proj_ba.weight", dst(model.DeltaBA), 2*d.ValueHeads, H); err != nil {
		return err
	}
	if err := h.take(la+"conv1d.weight", dst(model.DeltaConv), conv, 1, d.ConvKernel); err != nil {
		return err
	}
	h.reshape(dst(model.DeltaConv), conv, d.ConvKernel)
	if err := h.take(la+"dt_bias", dst(model.DeltaDTBias), d.ValueHeads); err != nil {
		return err
	}
	if err := h.take(la+"A_log", dst(model.DeltaALog), d.ValueHeads); err != nil {
		return err
	}
	if err := h.take(la+"norm.weight", dst(model.DeltaNorm), d.ValueDim); err != nil {
		return err
	}
	return h.take(la+"out_proj.weight", dst(model.DeltaOut), H, vd)
}

// gptOssExperts maps gpt-oss's MoE block: the affine router, and the
// experts stored transposed ([E, in, out], x @ W) with gate and up
// interleaved in gate_up_proj's columns (gate = [..., ::2], up = [..., 1::2]),
// each with a bias. The banks come out [E, out, in] in the source's element
// codec.
func (h *hfLoader) gptOssExperts(block string, i int, m *model.MoE, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	E, I := m.Experts, m.ExpertHidden
	if err := h.take(block+"router.weight", dst(model.FFNRouter), E, H); err != nil {
		return err
	}
	if err := h.take(block+"router.bias", dst(model.FFNRouterB), E); err != nil {
		return err
	}
	if h.has(block + "experts.gate_up_proj_blocks") {
		if err := h.gptOssMXFP4(block, i, E, I, H); err != nil {
			return err
		}
	} else if err := h.gptOssFloatExperts(block, i, E, I, H); err != nil {
		return err
	}
	gub, err := h.get(block+"experts.gate_up_proj_bias", E, 2*I)
	if err != nil {
		return err
	}
	for j, name := range []string{model.FFNGateExpsB, model.FFNUpExpsB} {
		t, err := hfPermute(gub, dst(name), []int{E, I}, func(e, r, _ int) int { return e*2*I + 2*r + j })
		if err != nil {
			return fmt.Errorf("%s: %w", h.fileOf(block+"experts.gate_up_proj_bias"), err)
		}
		h.out[t.Name] = t
	}
	return h.take(block+"experts.down_proj_bias", dst(model.FFNDownExpsB), E, H)
}

// gptOssFloatExperts maps float expert banks (bf16, f32): gate_up_proj
// [E, H, 2I] and down_proj [E, I, H], transposed to [E, out, in].
func (h *hfLoader) gptOssFloatExperts(block string, i, E, I, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	gu, err := h.get(block+"experts.gate_up_proj", E, H, 2*I)
	if err != nil {
		return err
	}
	// gate[e][r][c] = gu[e][c][2r], up[e][r][c] = gu[e][c][2r+1].
	for j, name := range []string{model.FFNGateExps, model.FFNUpExps} {
		t, err := hfPermute(gu, dst(name), []int{E, I, H}, func(e, r, c int) int { return (e*H+c)*2*I + 2*r + j })
		if err != nil {
			return fmt.Errorf("%s: %w", h.fileOf(block+"experts.gate_up_proj"), err)
		}
		h.out[t.Name] = t
	}
	down, err := h.get(block+"experts.down_proj", E, I, H)
	if err != nil {
		return err
	}
	t, err := hfPermute(down, dst(model.FFNDownExps), []int{E, H, I}, func(e, r, c int) int { return (e*I+c)*H + r })
	if err != nil {
		return fmt.Errorf("%s: %w", h.fileOf(block+"experts.down_proj"), err)
	}
	h.out[t.Name] = t
	return nil
}

// gptOssMXFP4 maps the MXFP4 experts gpt-oss checkpoints ship
// (quant_method mxfp4): *_blocks [E, rows, cols/32, 16] uint8 and *_scales
// [E, rows, cols/32] uint8, a row being one output of the [out, in] matrix
// (gate_up_proj's rows interleave gate and up). transformers decodes byte k
// of a block as elements 2k (low nibble) and 2k+1 (high nibble), each
// FP4_VALUES[nibble]·2^(scale-127). The blocks become GGUF MXFP4 blocks
// (e8m0 byte, then qs[j] holding elements j and j+16), the same values,
// kept quantized.
func (h *hfLoader) gptOssMXFP4(block string, i, E, I, H int) error {
	dst := func(s string) string { return model.LayerTensor(i, s) }
	if H%32 != 0 || I%32 != 0 {
		return fmt.Errorf("MXFP4 experts need hidden %d and intermediate %d to be multiples of 32", H, I)
	}
	gu, err := h.mxfp4Rows(block+"experts.gate_up_proj", E, 2*I, H)
	if err != nil {
		return err
	}
	rb := H / 32 * 17
	for j, name := range []string{model.FFNGateExps, model.FFNUpExps} {
		data := make([]byte, 0, E*I*rb)
		for e := range E {
			for r := range I {
				o := ((e * 2 * I) + 2*r + j) * rb
				data = append(data, gu[o:o+rb]...)
			}
		}
		h.out[dst(name)] = &tensor.Tensor{Name: dst(name), Codec: tensor.MXFP4, Shape: []int{E, I, H}, Data: data}
	}
	down, err := h.mxfp4Rows(block+"experts.down_proj", E, H, I)
	if err != nil {
		return err
	}
	h.out[dst(model.FFNDownExps)] = &tensor.Tensor{Name: dst(model.FFNDownExps), Codec: tensor.MXFP4, Shape: []int{E, H, I}, Data: down}
	return nil
}

// mxfp4Rows reads base+"_blocks" and base+"_scales" for an [E, rows, cols]
// matrix bank and returns its GGUF MXFP4 bytes, row after row.
func (h *hfLoader) mxfp4Rows(base string, E, rows, cols int) ([]byte, error) {
	G := cols / 32
	raw := func(name string, shape ...int) ([]byte, error) {
		in, ok := h.set.Info(name)
		if !ok {
			return nil, fmt.Errorf("missing tensor %q (%s)", name, strings.Join(h.set.Paths(), ", "))
		}
		if in.DType != safetensors.U8 || !slices.Equal(in.Shape, shape) {
			return nil, fmt.Errorf("%s: tensor %q is %s%v, MXFP4 needs U8%v", h.fileOf(name), name, in.DType, in.Shape, shape)
		}
		f, _ := h.set.File(name)
		b, err := f.Bytes(name)
		if err != nil {
			return nil, err
		}
		h.used[name] = true
		return b, nil
	}
	blocks, err := raw(base+"_blocks", E, rows, G, 16)
	if err != nil {
		return nil, err
	}
	scales, err := raw(base+"_scales", E, rows, G)
	if err != nil {
		return nil, err
	}
	out := make([]byte, E*rows*G*17)
	for b := range E * rows * G {
		src := blocks[16*b : 16*b+16]
		o := out[17*b : 17*b+17]
		o[0] = scales[b]
		nib := func(k int) byte { // element k of the block
			if k%2 == 0 {
				return src[k/2] & 0xf
			}
			return src[k/2] >> 4
		}
		for j := range 16 {
			o[1+j] = nib(j) | nib(j+16)<<4
		}
	}
	return out, nil
}

// hfPermute builds a tensor of shape (2 or 3 dims; a 2-D shape calls src
// with c = 0) whose element (e, r, c) is element src(e, r, c) of t, copying
// element bytes so that the codec (f32, f16, bf16) is kept.
func hfPermute(t *tensor.Tensor, name string, shape []int, src func(e, r, c int) int) (*tensor.Tensor, error) {
	if t.Codec.Quantized() {
		return nil, fmt.Errorf("tensor %q: %s cannot be rearranged element by element", t.Name, t.Codec)
	}
	es := t.Codec.BlockBytes()
	E, R, C := shape[0], shape[1], 1
	if len(shape) == 3 {
		C = shape[2]
	}
	out := make([]byte, E*R*C*es)
	k := 0
	for e := range E {
		for r := range R {
			for c := range C {
				o := src(e, r, c) * es
				copy(out[k:k+es], t.Data[o:o+es])
				k += es
			}
		}
	}
	return &tensor.Tensor{Name: name, Codec: t.Codec, Shape: slices.Clone(shape), Data: out}, nil
}

// Package ggufarch translates between llama.cpp's GGUF conventions and
// model.Arch: the metadata keys of each architecture, the tensors llama.cpp
// names or fuses otherwise (family.Family's GGUF traits), RoPE scaling kept
// as tensors. The GGUF importer reads an Arch with it, and the GGUF writer
// checks with it that what it would write reads back as the model it has.
// It is internal because it is the shared half of those two, not an API.
package ggufarch

import (
	"fmt"
	"math"
	"strings"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/model/family"
	"github.com/cortiq/cortiq/tensor"
)

// View says where a canonical tensor's bytes lie in the file: N bytes at
// Off into the stored tensor Src (a whole tensor, or a row range of a fused
// one).
type View struct {
	Src    string
	Off, N int64
}

// Tokenizer keys of a GGUF file written from a Hugging Face checkpoint,
// whose tokenizer has no llama.cpp vocabulary form here: tokenizer.json
// under the GGUF specification's tokenizer.huggingface.json, the other files
// (tokenizer_config.json with the chat template, generation_config.json,
// ...) under HFFilePrefix + their name.
const (
	HFTokenizerKey = "tokenizer.huggingface.json"
	HFFilePrefix   = "cortiq.huggingface."
)

// Canonicalize gives the tensors of a family fam file their canonical names
// in w (tensor headers by name): fused q/k/v and gate/up become row ranges,
// differently named norms are renamed. views, when not nil, follows: each
// canonical tensor's View.
func Canonicalize(f *gguf.File, fam *family.Family, w model.MapWeights, views map[string]View) error {
	g := meta{f: f, arch: fam.GGUF, fam: fam, views: views}
	if fam.GGUFFusedSplit {
		if err := splitFused(g, w); err != nil {
			return err
		}
	}
	if fam.GGUFFFNNorm != "" {
		renameFFNNorm(g, w)
	}
	return nil
}

// Arch derives the Arch of a family fam file from its metadata and its
// canonical tensor headers w (after Canonicalize): dimensions, RoPE
// (rope_freqs.weight read back into Llama 3 scaling), sliding windows,
// biases, norms and experts by the tensors present, then the family's quirk.
func Arch(f *gguf.File, fam *family.Family, w model.MapWeights) (model.Arch, error) {
	return readArch(meta{f: f, arch: fam.GGUF, fam: fam}, w)
}

// CheckShapes verifies the tensors every layer of a needs, so that a
// malformed file fails here with a clear message rather than in a kernel.
func CheckShapes(f *gguf.File, fam *family.Family, a *model.Arch, w model.MapWeights) error {
	return checkShapes(meta{f: f, arch: fam.GGUF, fam: fam}, a, w)
}

// meta reads architecture keys with errors that name the file and key.
type meta struct {
	f     *gguf.File
	arch  string
	fam   *family.Family
	views map[string]View // where canonical tensors lie, for unmapped files
}

func (g meta) key(k string) string { return g.arch + "." + k }

func (g meta) errorf(format string, args ...any) error {
	return fmt.Errorf("gguf: %s: "+format, append([]any{g.f.Name}, args...)...)
}

// intKey reads a positive integer key, which may also be a per-layer array
// (then layer picks the element; layer -1 requires a scalar or a uniform array).
func (g meta) intKey(k string, layer int, def int) (int, error) {
	full := g.key(k)
	v, ok := g.f.Metadata[full]
	if !ok {
		if def >= 0 {
			return def, nil
		}
		return 0, g.errorf("missing metadata %s", full)
	}
	if n, ok := g.f.GetInt(full); ok {
		if n < 0 || n > math.MaxInt32 {
			return 0, g.errorf("metadata %s = %d out of range", full, n)
		}
		return int(n), nil
	}
	arr, ok := g.f.GetInts(full)
	if !ok {
		return 0, g.errorf("metadata %s has type %T, want an integer", full, v)
	}
	if layer < 0 {
		for _, x := range arr[min(1, len(arr)):] {
			if x != arr[0] {
				return 0, g.errorf("metadata %s varies per layer where one value is needed", full)
			}
		}
		layer = 0
	}
	if layer >= len(arr) {
		return 0, g.errorf("metadata %s has %d entries, need layer %d", full, len(arr), layer)
	}
	if arr[layer] < 0 || arr[layer] > math.MaxInt32 {
		return 0, g.errorf("metadata %s[%d] = %d out of range", full, layer, arr[layer])
	}
	return int(arr[layer]), nil
}

func (g meta) floatKey(k string, def float64) (float64, error) {
	full := g.key(k)
	v, ok := g.f.Metadata[full]
	if !ok {
		return def, nil
	}
	x, ok := g.f.GetFloat(full)
	if !ok {
		return 0, g.errorf("metadata %s has type %T, want a number", full, v)
	}
	return x, nil
}

func readArch(g meta, w model.MapWeights) (model.Arch, error) {
	f := g.f
	a := model.Arch{
		Family: g.arch, Norm: model.NormRMS, Act: model.ActSiLU,
		EmbedScale: 1, ResidualScale: 1, LogitScale: 1, BOS: -1,
	}
	var err error
	if a.Hidden, err = g.intKey("embedding_length", -1, -1); err != nil {
		return a, err
	}
	nLayers, err := g.intKey("block_count", -1, -1)
	if err != nil {
		return a, err
	}
	if nLayers <= 0 || nLayers > 1<<16 {
		return a, g.errorf("block_count %d", nLayers)
	}
	if a.Context, err = g.intKey("context_length", -1, 0); err != nil {
		return a, err
	}
	if _, ok := g.f.Metadata[g.key("attention.layer_norm_rms_epsilon")]; !ok {
		return a, g.errorf("missing metadata %s", g.key("attention.layer_norm_rms_epsilon"))
	}
	eps, err := g.floatKey("attention.layer_norm_rms_epsilon", 0)
	if err != nil {
		return a, err
	}
	a.NormEps = float32(eps) // checked by Arch.Validate

	// Vocabulary: the embedding matrix is the truth for the math (some
	// vocabularies are padded); the metadata serves when it is absent.
	if emb, ok := w[model.TokenEmbd]; ok && len(emb.Shape) == 2 {
		a.Vocab = emb.Shape[0]
	} else if a.Vocab, err = g.intKey("vocab_size", -1, 0); err != nil {
		return a, err
	} else if a.Vocab == 0 {
		if n, ok := f.ArrayLen("tokenizer.ggml.tokens"); ok {
			a.Vocab = n
		}
	}
	_, hasOutput := w[model.Output]
	a.TiedEmbeddings = !hasOutput

	if id, ok := f.GetInt("tokenizer.ggml.bos_token_id"); ok && id >= 0 && id < math.MaxInt32 {
		a.BOS = int(id)
	}
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if id, ok := f.GetInt(k); ok && id >= 0 && id < math.MaxInt32 && !containsInt(a.EOS, int(id)) {
			a.EOS = append(a.EOS, int(id))
		}
	}

	if g.fam.Act != "" {
		// gpt-oss: llama.cpp's graph hardcodes the clamped SwiGLU (as
		// transformers' GptOssExperts does).
		a.Act, a.SwiGLULimit, a.SwiGLUAlpha = g.fam.Act, g.fam.SwiGLULimit, g.fam.SwiGLUAlpha
	}
	if g.fam.GemmaMLP {
		a.Act = model.ActGELUTanh
		a.EmbedScale = float32(math.Sqrt(float64(a.Hidden)))
	}
	softcap, err := g.floatKey("final_logit_softcapping", 0)
	if err != nil {
		return a, err
	}
	a.FinalSoftcap = float32(softcap)

	shared, err := rope(g, w)
	if err != nil {
		return a, err
	}
	window, err := g.intKey("attention.sliding_window", -1, 0)
	if err != nil {
		return a, err
	}
	attnSoftcap, err := g.floatKey("attn_logit_softcapping", 0)
	if err != nil {
		return a, err
	}
	explicitScale, err := g.floatKey("attention.scale", 0)
	if err != nil {
		return a, err
	}
	experts, err := g.intKey("expert_count", -1, 0)
	if err != nil {
		return a, err
	}

	for i := range nLayers {
		l := model.Layer{Mixer: model.MixerAttention, FFN: model.FFNDense, PreMixerNorm: true, PreFFNNorm: true}
		at := &model.Attention{Rope: shared}
		if at.Heads, err = g.intKey("attention.head_count", i, -1); err != nil {
			return a, err
		}
		if at.Heads <= 0 {
			return a, g.errorf("layer %d: %s is %d", i, g.key("attention.head_count"), at.Heads)
		}
		if at.KVHeads, err = g.intKey("attention.head_count_kv", i, at.Heads); err != nil {
			return a, err
		}
		if at.HeadDim, err = g.intKey("attention.key_length", i, a.Hidden/at.Heads); err != nil {
			return a, err
		}
		if vd, err := g.intKey("attention.value_length", i, at.HeadDim); err != nil {
			return a, err
		} else if vd != at.HeadDim {
			return a, g.errorf("value_length %d differs from key_length %d (not supported)", vd, at.HeadDim)
		}
		if at.Rope.Dims == 0 || at.Rope.Dims > at.HeadDim {
			at.Rope.Dims = at.HeadDim
		}
		at.Scale = float32(1 / math.Sqrt(float64(at.HeadDim)))
		if explicitScale > 0 {
			at.Scale = float32(explicitScale)
		}
		at.Softcap = float32(attnSoftcap)
		switch {
		case g.fam.GGUFSliding == family.SlideEven && window > 0:
			// llama.cpp's swa pattern 2: even layers slide.
			if i%2 == 0 {
				at.Window = window
			}
		case g.fam.GGUFSliding == family.SlideGemma3 && window > 0:
			if i%6 != 5 {
				at.Window = window
				// Local layers use their own base and no scaling.
				base, err := g.floatKey("rope.freq_base_swa", 10000)
				if err != nil {
					return a, err
				}
				at.Rope.Theta = base
				at.Rope.Scaling = model.RopeScaling{}
			}
		default:
			at.Window = window
		}
		_, at.Bias = w[model.LayerTensor(i, model.AttnQBias)]
		_, at.OutBias = w[model.LayerTensor(i, model.AttnOutBias)]
		_, at.Sinks = w[model.LayerTensor(i, model.AttnSinks)]
		if qn, ok := w[model.LayerTensor(i, model.AttnQNorm)]; ok {
			at.QKNorm = model.QKNormPerHead
			if qn.Elements() != at.HeadDim {
				at.QKNorm = model.QKNormFull
			}
		}
		l.Attn = at
		_, l.PostMixerNorm = w[model.LayerTensor(i, model.PostAttnNorm)]
		_, l.PostFFNNorm = w[model.LayerTensor(i, model.PostFFNNorm)]

		if experts > 0 {
			moe, err := moe(g, i, experts, w)
			if err != nil {
				return a, err
			}
			l.FFN, l.MoE = model.FFNMoE, moe
		} else if l.FFNHidden, err = g.intKey("feed_forward_length", i, -1); err != nil {
			return a, err
		}
		a.Layers = append(a.Layers, l)
	}
	if g.fam.GGUFQuirk != nil {
		g.fam.GGUFQuirk(&a)
	}
	return a, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func moe(g meta, layer, experts int, w model.MapWeights) (*model.MoE, error) {
	m := &model.MoE{Experts: experts, Scoring: "softmax"}
	var err error
	if m.TopK, err = g.intKey("expert_used_count", -1, -1); err != nil {
		return nil, err
	}
	if m.ExpertHidden, err = g.intKey("expert_feed_forward_length", layer, 0); err != nil {
		return nil, err
	}
	if m.ExpertHidden == 0 {
		if m.ExpertHidden, err = g.intKey("feed_forward_length", layer, -1); err != nil {
			return nil, err
		}
	}
	if m.SharedHidden, err = g.intKey("expert_shared_feed_forward_length", layer, 0); err != nil {
		return nil, err
	}
	if _, ok := w[model.LayerTensor(layer, model.FFNGateShexp)]; ok && m.SharedHidden == 0 {
		if t := w[model.LayerTensor(layer, model.FFNGateShexp)]; len(t.Shape) == 2 {
			m.SharedHidden = t.Shape[0]
		}
	}
	_, m.SharedGate = w[model.LayerTensor(layer, model.FFNShexpGate)]
	// Mixtral (llama) and Qwen3-MoE renormalize the selected weights;
	// Qwen2-MoE does not (llama.cpp hardcodes the same). A file may say so
	// explicitly.
	m.NormTopK = !g.fam.GGUFNoNormTopK
	if v, ok := g.f.GetBool(g.key("expert_weights_norm")); ok {
		m.NormTopK = v
	}
	if g.fam.GGUFRouter == "topk_softmax" {
		// gpt-oss: softmax over the selected logits (SOFTMAX_WEIGHT).
		m.Scoring, m.NormTopK = "topk_softmax", false
	}
	_, m.RouterBias = w[model.LayerTensor(layer, model.FFNRouterB)]
	_, m.ExpertBias = w[model.LayerTensor(layer, model.FFNGateExpsB)]
	if _, ok := w[model.LayerTensor(layer, model.FFNGateExps)]; !ok {
		return nil, g.errorf("layer %d: expert_count %d but no stacked %s (per-expert GGUF tensors are not supported; reconvert with a current llama.cpp)",
			layer, experts, model.LayerTensor(layer, model.FFNGateExps))
	}
	return m, nil
}

// YarnMscale is transformers' get_mscale: YaRN's default attention factor.
func YarnMscale(factor float64) float64 {
	if factor <= 1 {
		return 1
	}
	return 0.1*math.Log(factor) + 1
}

// renameFFNNorm gives the pre-FFN norm its canonical name where
// llama.cpp names it otherwise (family.Family.GGUFFFNNorm: gpt-oss keeps it
// as post_attention_norm, transformers' post_attention_layernorm, a
// pre-norm of the MoE).
func renameFFNNorm(g meta, w model.MapWeights) {
	from := g.fam.GGUFFFNNorm
	for name, t := range w {
		if !strings.HasPrefix(name, "blk.") || !strings.HasSuffix(name, "."+from) {
			continue
		}
		canon := strings.TrimSuffix(name, from) + model.FFNNorm
		if _, dup := w[canon]; dup {
			continue
		}
		t.Name = canon
		w[canon] = t
		delete(w, name)
		if g.views != nil {
			g.views[canon] = g.views[name]
			delete(g.views, name)
		}
	}
}

// rope reads the rotary embedding shared by all layers.
func rope(g meta, w model.MapWeights) (model.Rope, error) {
	r := model.Rope{Style: model.RopeNeoX}
	if g.fam.GGUFRope != "" {
		r.Style = g.fam.GGUFRope
	}
	var err error
	if r.Theta, err = g.floatKey("rope.freq_base", 10000); err != nil {
		return r, err
	}
	if r.Dims, err = g.intKey("rope.dimension_count", -1, 0); err != nil {
		return r, err
	}
	typ, _ := g.f.GetString(g.key("rope.scaling.type"))
	factor, err := g.floatKey("rope.scaling.factor", 0)
	if err != nil {
		return r, err
	}
	if factor == 0 {
		// Older files spell linear scaling as rope.scale_linear.
		if factor, err = g.floatKey("rope.scale_linear", 0); err != nil {
			return r, err
		}
		if factor != 0 && typ == "" {
			typ = "linear"
		}
	}
	orig, err := g.intKey("rope.scaling.original_context_length", -1, 0)
	if err != nil {
		return r, err
	}
	switch typ {
	case "", "none":
	case "linear":
		if factor != 0 && factor != 1 {
			r.Scaling = model.RopeScaling{Type: "linear", Factor: factor}
		}
	case "yarn":
		r.Scaling = model.RopeScaling{Type: "yarn", Factor: factor, OriginalContext: orig}
		if r.Scaling.BetaFast, err = g.floatKey("rope.scaling.yarn_beta_fast", 32); err != nil {
			return r, err
		}
		if r.Scaling.BetaSlow, err = g.floatKey("rope.scaling.yarn_beta_slow", 1); err != nil {
			return r, err
		}
		if r.Scaling.AttnFactor, err = g.floatKey("rope.scaling.attn_factor", 0); err != nil {
			return r, err
		}
		if g.fam.GGUFYarnMscale {
			// gpt-oss: transformers' config says truncate=false, and
			// llama.cpp's YaRN multiplies its attn_factor (default 1) by
			// 1+0.1·ln(factor), transformers' default attention factor.
			r.Scaling.NoTruncate = true
			if r.Scaling.AttnFactor == 0 {
				r.Scaling.AttnFactor = 1
			}
			r.Scaling.AttnFactor *= YarnMscale(factor)
		}
	default:
		return r, g.errorf("unsupported rope scaling type %q", typ)
	}
	for _, n := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
		if _, ok := w[n]; ok {
			return r, g.errorf("LongRoPE (%s) is not supported", n)
		}
	}
	if ff, ok := w["rope_freqs.weight"]; ok {
		s, err := llama3Scaling(g, ff, r.Theta, orig)
		if err != nil {
			return r, err
		}
		r.Scaling = s
	}
	return r, nil
}

// llama3Scaling recovers Llama 3.1's rope scaling, which llama.cpp's
// converter bakes into a rope_freqs tensor of per-frequency divisors instead
// of metadata. The divisors are recomputed from the candidate parameters
// (factor = the largest divisor; low/high frequency factors 1 and 4 over an
// original context of 8192, as every Llama 3.x release uses) and must match.
func llama3Scaling(g meta, t *tensor.Tensor, theta float64, orig int) (model.RopeScaling, error) {
	n := t.Elements()
	if t.Codec != tensor.F32 || n == 0 {
		return model.RopeScaling{}, g.errorf("rope_freqs.weight: %s with %d elements, want f32", t.Codec, n)
	}
	data := t.Data
	if data == nil { // unmapped file: read it
		var err error
		if data, err = g.f.RawData(t.Name); err != nil {
			return model.RopeScaling{}, err
		}
	}
	div := make([]float32, n)
	if err := tensor.Dequantize(div, t.Codec, data); err != nil {
		return model.RopeScaling{}, g.errorf("rope_freqs.weight: %v", err)
	}
	factor := float64(0)
	for _, d := range div {
		factor = max(factor, float64(d))
	}
	if orig == 0 {
		orig = 8192
	}
	s := model.RopeScaling{Type: "llama3", Factor: factor, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: orig}
	lowWave := float64(orig) / s.LowFreqFactor
	highWave := float64(orig) / s.HighFreqFactor
	dims := 2 * n
	for i, d := range div {
		freq := math.Pow(theta, -float64(2*i)/float64(dims))
		wave := 2 * math.Pi / freq
		want := 1.0
		switch {
		case wave < highWave:
		case wave > lowWave:
			want = factor
		default:
			smooth := (float64(orig)/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			want = 1 / ((1-smooth)/factor + smooth)
		}
		if math.Abs(float64(d)-want) > 1e-3*want {
			return model.RopeScaling{}, g.errorf("rope_freqs.weight[%d] = %g does not match Llama 3 scaling (factor %g, expected %g): unsupported frequency factors", i, d, factor, want)
		}
	}
	if factor == 1 {
		return model.RopeScaling{}, nil
	}
	return s, nil
}

// splitFused replaces the fused attn_qkv and gate+up ffn_up of a
// family with family.Family.GGUFFusedSplit (Phi-3) by the canonical tensors,
// as row ranges (views) of the fused ones.
func splitFused(g meta, w model.MapWeights) error {
	nLayers, err := g.intKey("block_count", -1, -1)
	if err != nil {
		return err
	}
	hidden, err := g.intKey("embedding_length", -1, -1)
	if err != nil {
		return err
	}
	for i := range nLayers {
		heads, err := g.intKey("attention.head_count", i, -1)
		if err != nil || heads <= 0 {
			return g.errorf("layer %d: bad attention.head_count", i)
		}
		kv, err := g.intKey("attention.head_count_kv", i, heads)
		if err != nil {
			return err
		}
		hd, err := g.intKey("attention.key_length", i, hidden/heads)
		if err != nil {
			return err
		}
		if qkv, ok := w[model.LayerTensor(i, "attn_qkv.weight")]; ok {
			names := []string{model.AttnQ, model.AttnK, model.AttnV}
			if err := splitRows(g, w, qkv, i, names, []int{heads * hd, kv * hd, kv * hd}); err != nil {
				return err
			}
		}
		if _, hasGate := w[model.LayerTensor(i, model.FFNGate)]; !hasGate {
			up, ok := w[model.LayerTensor(i, model.FFNUp)]
			if ok && len(up.Shape) == 2 && up.Shape[0]%2 == 0 {
				ff := up.Shape[0] / 2
				if err := splitRows(g, w, up, i, []string{model.FFNGate, model.FFNUp}, []int{ff, ff}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func splitRows(g meta, w model.MapWeights, t *tensor.Tensor, layer int, names []string, rows []int) error {
	total := 0
	for _, r := range rows {
		total += r
	}
	if len(t.Shape) != 2 || t.Shape[0] != total {
		return g.errorf("%s: shape %v, want [%d, *] to split into %v", t.Name, t.Shape, total, names)
	}
	rb, err := t.Codec.RowBytes(t.Shape[1])
	if err != nil {
		return g.errorf("%s: %v", t.Name, err)
	}
	delete(w, t.Name)
	src, hasView := g.views[t.Name]
	off := 0
	for k, r := range rows {
		name := model.LayerTensor(layer, names[k])
		end := off + r*rb
		part := &tensor.Tensor{Name: name, Codec: t.Codec, Shape: []int{r, t.Shape[1]}}
		if t.Data != nil {
			part.Data = t.Data[off:end:end]
		}
		if hasView {
			g.views[name] = View{Src: src.Src, Off: src.Off + int64(off), N: int64(end - off)}
		}
		w[name] = part
		off = end
	}
	return nil
}

// checkShapes verifies the tensors every layer needs, so that a
// malformed file fails here with a clear message rather than in a kernel.
func checkShapes(g meta, a *model.Arch, w model.MapWeights) error {
	check := func(name string, shape ...int) error {
		t, ok := w[name]
		if !ok {
			return g.errorf("missing tensor %s", name)
		}
		if len(t.Shape) != len(shape) {
			return g.errorf("tensor %s has shape %v, want %v", name, t.Shape, shape)
		}
		for i := range shape {
			if t.Shape[i] != shape[i] {
				return g.errorf("tensor %s has shape %v, want %v", name, t.Shape, shape)
			}
		}
		return nil
	}
	H := a.Hidden
	if err := check(model.TokenEmbd, a.Vocab, H); err != nil {
		return err
	}
	if err := check(model.OutputNorm, H); err != nil {
		return err
	}
	if !a.TiedEmbeddings {
		if err := check(model.Output, a.Vocab, H); err != nil {
			return err
		}
	}
	for i, l := range a.Layers {
		at := l.Attn
		q, kv := at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
		for _, c := range []struct {
			suffix string
			shape  []int
		}{
			{model.AttnNorm, []int{H}},
			{model.AttnQ, []int{q, H}},
			{model.AttnK, []int{kv, H}},
			{model.AttnV, []int{kv, H}},
			{model.AttnOut, []int{H, q}},
			{model.FFNNorm, []int{H}},
		} {
			if err := check(model.LayerTensor(i, c.suffix), c.shape...); err != nil {
				return err
			}
		}
		if l.FFN == model.FFNDense {
			ff := l.FFNHidden
			for _, c := range []struct {
				suffix string
				shape  []int
			}{
				{model.FFNGate, []int{ff, H}},
				{model.FFNUp, []int{ff, H}},
				{model.FFNDown, []int{H, ff}},
			} {
				if err := check(model.LayerTensor(i, c.suffix), c.shape...); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Package importer turns model files (a Hugging Face checkpoint directory, a
// GGUF file, a CMF file) into a model.Model: a normalized Arch plus weights
// under canonical tensor names (model/names.go). What a family leaves
// implicit comes from its record in model/family; the importer compares no
// family names.
//
// The importer only reads. Weights alias a file's memory mapping where
// there is one; elsewhere (the browser, platforms without mmap) the three
// containers share one lazy implementation that reads a tensor, or a range
// of its rows (model.RangeReader), when asked. Writing models is package
// writer's; OpenCached uses it to cache Hugging Face conversions as CMF.
package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cortiq/cortiq/internal/jsonerr"
	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/model/family"
	"github.com/cortiq/cortiq/safetensors"
)

// hfTokenizerFiles are copied into Model.Tokenizer when present.
// chat_template.jinja is where transformers >= 4.43 saves the chat template
// (older checkpoints keep it in tokenizer_config.json).
var hfTokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json",
	"special_tokens_map.json", "chat_template.jinja", "chat_template.json"}

// FromHF imports a Hugging Face checkpoint directory: config.json plus
// model.safetensors (or sharded model-*.safetensors with
// model.safetensors.index.json), and the tokenizer files when present.
// Weights keep their dtype (F32, F16 or BF16) and alias the memory-mapped
// files, except fused tensors that are split (views) and MoE experts that are
// packed into one bank per layer (copies). Model.Close releases the mapping.
func FromHF(dir string) (*model.Model, error) { return fromHF(context.Background(), dir) }

// fromHF is FromHF stopping with ctx's error when ctx is done while the
// source files are digested (a read of every byte).
func fromHF(ctx context.Context, dir string) (*model.Model, error) {
	cfgPath := filepath.Join(dir, "config.json")
	cfgBytes, err := mapfile.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	cfg, err := hfParseConfig(cfgBytes)
	if err != nil {
		return nil, fmt.Errorf("hf: %s: %w", cfgPath, err)
	}
	arch, err := hfArch(&cfg)
	if err != nil {
		return nil, fmt.Errorf("hf: %s: %w", cfgPath, err)
	}
	gen, _ := mapfile.ReadFile(filepath.Join(dir, "generation_config.json"))
	if err := hfSpecialTokens(&arch, &cfg, gen); err != nil {
		return nil, fmt.Errorf("hf: %s: %w", dir, err)
	}

	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	w, err := hfWeights(&cfg, &arch, set)
	if err != nil {
		set.Close()
		return nil, fmt.Errorf("hf: %s: %w", dir, err)
	}
	if err := arch.Validate(); err != nil {
		set.Close()
		return nil, fmt.Errorf("hf: %s: %w", dir, err)
	}

	m := &model.Model{Arch: arch, Weights: w, Close: set.Close}
	tok := &model.TokenizerData{Kind: "hf", Files: map[string][]byte{}}
	for _, name := range hfTokenizerFiles {
		if b, err := mapfile.ReadFile(filepath.Join(dir, name)); err == nil {
			tok.Files[name] = b
		}
	}
	if _, ok := tok.Files["tokenizer.json"]; ok {
		m.Tokenizer = tok
	}
	prov := model.Provenance{Format: "hf"}
	files := []string{cfgPath}
	files = append(files, set.Paths()...)
	if _, err := os.Stat(filepath.Join(dir, safetensors.IndexFile)); err == nil {
		files = append(files, filepath.Join(dir, safetensors.IndexFile))
	}
	for _, name := range hfTokenizerFiles {
		if _, ok := tok.Files[name]; ok {
			files = append(files, filepath.Join(dir, name))
		}
	}
	for _, p := range files {
		sf, err := hfDigest(ctx, p)
		if err != nil {
			set.Close()
			return nil, fmt.Errorf("hf: %w", err)
		}
		prov.Files = append(prov.Files, sf)
	}
	m.Source = prov
	return m, nil
}

func hfDigest(ctx context.Context, path string) (model.SourceFile, error) {
	sum, n, err := fileSHA256(ctx, path)
	if err != nil {
		return model.SourceFile{}, err
	}
	return model.SourceFile{Name: filepath.Base(path), Size: n, SHA256: sum}, nil
}

// hfParseConfig decodes config.json. A multimodal checkpoint whose family
// keeps its language model in text_config (family.Family.HFWrapper, Gemma 3)
// is read as that language model; the vision tower is ignored.
func hfParseConfig(b []byte) (hfConfig, error) {
	var c hfConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return c, jsonerr.Error(err)
	}
	fam := hfWrapped(c.ModelType)
	if fam == nil {
		return c, nil
	}
	if isNull(c.TextConfig) {
		return c, fmt.Errorf("model_type %q without text_config", c.ModelType)
	}
	var t hfConfig
	if err := json.Unmarshal(c.TextConfig, &t); err != nil {
		return c, fmt.Errorf("text_config: %w", jsonerr.Error(err))
	}
	if t.ModelType == "" {
		t.ModelType = fam.HF
	}
	if t.ModelType != fam.HF {
		return c, fmt.Errorf("%s text_config has model_type %q", c.ModelType, t.ModelType)
	}
	// Special tokens and tying may sit at the top level.
	if isNull(t.EosTokenID) {
		t.EosTokenID = c.EosTokenID
	}
	if isNull(t.BosTokenID) {
		t.BosTokenID = c.BosTokenID
	}
	if t.TieWordEmbeddings == nil {
		t.TieWordEmbeddings = c.TieWordEmbeddings
	}
	return t, nil
}

// hfWrapped returns the family a multimodal model_type wraps, or nil.
func hfWrapped(modelType string) *family.Family {
	for _, f := range family.All {
		if f.HFWrapper != "" && f.HFWrapper == modelType {
			return f
		}
	}
	return nil
}

// hfSpecialTokens sets BOS and EOS: generation_config.json's eos_token_id
// wins over config.json's, as in transformers' generate.
func hfSpecialTokens(a *model.Arch, c *hfConfig, gen []byte) error {
	a.BOS = -1
	var g struct {
		Bos json.RawMessage `json:"bos_token_id"`
		Eos json.RawMessage `json:"eos_token_id"`
	}
	if len(gen) > 0 {
		if err := json.Unmarshal(gen, &g); err != nil {
			return fmt.Errorf("generation_config.json: %w", jsonerr.Error(err))
		}
	}
	bos, err := hfTokenIDs(c.BosTokenID)
	if err != nil {
		return fmt.Errorf("bos_token_id: %w", err)
	}
	if len(bos) == 0 {
		if bos, err = hfTokenIDs(g.Bos); err != nil {
			return fmt.Errorf("generation_config.json: bos_token_id: %w", err)
		}
	}
	if len(bos) > 0 {
		a.BOS = bos[0]
	}
	eos, err := hfTokenIDs(g.Eos)
	if err != nil {
		return fmt.Errorf("generation_config.json: eos_token_id: %w", err)
	}
	if len(eos) == 0 {
		if eos, err = hfTokenIDs(c.EosTokenID); err != nil {
			return fmt.Errorf("eos_token_id: %w", err)
		}
	}
	for _, id := range append(eos, a.BOS) {
		if id < -1 || id >= a.Vocab {
			return fmt.Errorf("special token id %d outside the vocabulary of %d", id, a.Vocab)
		}
	}
	a.EOS = eos
	return nil
}

// hfLayerTypes returns each layer's type as transformers names it
// ("full_attention", "sliding_attention", "conv", "linear_attention"):
// layer_types when the config has it, else the family's pattern.
func hfLayerTypes(c *hfConfig, fam *family.Family) ([]string, error) {
	n := c.NumHiddenLayers
	if len(c.LayerTypes) > 0 {
		if len(c.LayerTypes) != n {
			return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(c.LayerTypes), n)
		}
		return c.LayerTypes, nil
	}
	t := make([]string, n)
	for i := range t {
		t[i] = "full_attention"
	}
	alternate := func() {
		for i := range t {
			if (i+1)%2 != 0 {
				t[i] = "sliding_attention"
			}
		}
	}
	switch fam.Layers {
	case family.LayersAlternate:
		alternate()
	case family.LayersAlternateIfWindow:
		// transformers' GptOssConfig: sliding first, then alternating.
		if deref(c.SlidingWindow, 0) > 0 {
			alternate()
		}
	case family.LayersSlidingPattern:
		pat := deref(c.SlidingWindowPattern, deref(c.SlidingWindowPattern5, 6))
		for i := range t {
			if pat > 0 && (i+1)%pat != 0 {
				t[i] = "sliding_attention"
			}
		}
	case family.LayersMaxWindow:
		if deref(c.UseSlidingWindow, false) && deref(c.SlidingWindow, 0) > 0 {
			for i := range t {
				if i >= deref(c.MaxWindowLayers, 0) {
					t[i] = "sliding_attention"
				}
			}
		}
	case family.LayersAllSliding:
		if deref(c.SlidingWindow, 0) > 0 {
			for i := range t {
				t[i] = "sliding_attention"
			}
		}
	case family.LayersConvFullIdxs:
		// transformers: without full_attn_idxs every layer is attention.
		if c.FullAttnIdxs == nil {
			break
		}
		for i := range t {
			t[i] = "conv"
		}
		for _, i := range c.FullAttnIdxs {
			if i < 0 || i >= n {
				return nil, fmt.Errorf("full_attn_idxs entry %d out of range", i)
			}
			t[i] = "full_attention"
		}
	case family.LayersLinearInterval:
		iv := deref(c.FullAttentionInterval, 4)
		for i := range t {
			if iv <= 0 || (i+1)%iv != 0 {
				t[i] = "linear_attention"
			}
		}
	}
	return t, nil
}

func hfArch(c *hfConfig) (model.Arch, error) {
	var a model.Arch
	fam, ok := family.HF(c.ModelType)
	if !ok {
		return a, fmt.Errorf("model_type %q is not supported (supported: %s)", c.ModelType, strings.Join(family.HFNames(), ", "))
	}
	if c.HiddenSize <= 0 || c.VocabSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 {
		return a, fmt.Errorf("hidden_size %d, vocab_size %d, num_hidden_layers %d, num_attention_heads %d: all must be positive",
			c.HiddenSize, c.VocabSize, c.NumHiddenLayers, c.NumAttentionHeads)
	}
	const maxDim = 1 << 20
	if c.HiddenSize > maxDim || c.VocabSize > 1<<24 || c.NumHiddenLayers > 4096 || c.NumAttentionHeads > 4096 || c.IntermediateSize > 1<<22 {
		return a, errors.New("config dimensions are implausibly large")
	}
	if deref(c.UseBidirectionalAttention, false) {
		return a, errors.New("use_bidirectional_attention: encoder (embedding) models are not supported")
	}
	a.Family = fam.HF
	a.Vocab = c.VocabSize
	a.Hidden = c.HiddenSize
	a.Context = c.MaxPositionEmbeddings
	a.NormEps = float32(deref(c.RMSNormEps, deref(c.NormEps, 1e-6)))
	a.Norm = model.NormRMS
	if fam.Norm != "" {
		a.Norm = fam.Norm
	}
	act := c.HiddenAct
	if fam.GemmaMLP {
		// Gemma's MLP uses hidden_activation; old configs said "gelu" but
		// transformers runs the tanh approximation regardless.
		act = c.HiddenActivation
		if act == "" || act == "gelu" {
			act = "gelu_pytorch_tanh"
		}
	}
	switch act {
	case "silu", "swish", "":
		a.Act = model.ActSiLU
	case "gelu_pytorch_tanh", "gelu_tanh", "gelu_new", "gelu_fast":
		a.Act = model.ActGELUTanh
	default:
		return a, fmt.Errorf("activation %q is not supported", act)
	}
	if fam.Act != "" {
		// gpt-oss: GptOssExperts hardcodes its clamped SwiGLU (limit 7,
		// alpha 1.702) whatever hidden_act and swiglu_limit say.
		a.Act, a.SwiGLULimit, a.SwiGLUAlpha = fam.Act, fam.SwiGLULimit, fam.SwiGLUAlpha
	}
	a.EmbedScale = 1
	if fam.GemmaMLP {
		// transformers multiplies by sqrt(hidden) cast to the model dtype.
		a.EmbedScale = float32(math.Sqrt(float64(c.HiddenSize)))
	}
	a.ResidualScale = 1
	a.LogitScale = 1
	if fam.Multipliers {
		a.EmbedScale = float32(deref(c.EmbeddingMultiplier, 1))
		a.ResidualScale = float32(deref(c.ResidualMultiplier, 1))
		ls := deref(c.LogitsScaling, 1)
		if ls == 0 {
			return a, errors.New("logits_scaling is 0")
		}
		a.LogitScale = float32(1 / ls)
	}
	if fam.Softcaps {
		a.FinalSoftcap = float32(deref(c.FinalLogitSoftcapping, 0))
	}
	// Without tie_word_embeddings the weights decide (see hfWeights).
	a.TiedEmbeddings = deref(c.TieWordEmbeddings, false)
	if c.TieEmbedding != nil {
		a.TiedEmbeddings = *c.TieEmbedding
	}

	heads := c.NumAttentionHeads
	kvHeads := deref(c.NumKeyValueHeads, heads)
	headDim := deref(c.HeadDim, 0)
	if headDim <= 0 {
		headDim = c.HiddenSize / heads
	}
	if kvHeads <= 0 || heads%kvHeads != 0 || headDim <= 0 || headDim > 4096 {
		return a, fmt.Errorf("num_attention_heads %d, num_key_value_heads %d, head_dim %d are inconsistent", heads, kvHeads, headDim)
	}
	types, err := hfLayerTypes(c, fam)
	if err != nil {
		return a, err
	}
	if fam.NoRopeEvery > 0 && c.NoRopeLayers == nil {
		iv := deref(c.NoRopeLayerInterval, fam.NoRopeEvery)
		for i := range c.NumHiddenLayers {
			if iv > 0 && (i+1)%iv == 0 {
				c.NoRopeLayers = append(c.NoRopeLayers, 0)
			} else {
				c.NoRopeLayers = append(c.NoRopeLayers, 1)
			}
		}
	}
	if c.NoRopeLayers != nil && len(c.NoRopeLayers) != c.NumHiddenLayers {
		return a, fmt.Errorf("no_rope_layers has %d entries for %d layers", len(c.NoRopeLayers), c.NumHiddenLayers)
	}

	ffnHidden := c.IntermediateSize
	if fam.LFM2FFN {
		ffnHidden = hfLFM2FFDim(c)
	}
	expertCount := deref(c.NumExperts, deref(c.NumLocalExperts, 0))
	if expertCount > 1<<16 || deref(c.MoeIntermediateSize, 0) > 1<<22 || deref(c.SharedExpertIntermediateSize, 0) > 1<<22 {
		return a, errors.New("MoE dimensions are implausibly large")
	}
	sparseStep := deref(c.DecoderSparseStep, 1)

	a.Layers = make([]model.Layer, c.NumHiddenLayers)
	for i := range a.Layers {
		l := &a.Layers[i]
		switch types[i] {
		case "full_attention", "sliding_attention":
			at := &model.Attention{
				Heads:   heads,
				KVHeads: kvHeads,
				HeadDim: headDim,
				Scale:   float32(1 / math.Sqrt(float64(headDim))),
			}
			at.Rope, err = c.hfRope(fam, types[i], headDim)
			if err != nil {
				return a, fmt.Errorf("layer %d: %w", i, err)
			}
			if c.NoRopeLayers != nil && c.NoRopeLayers[i] == 0 {
				at.Rope.Dims = 0
			}
			if types[i] == "sliding_attention" {
				at.Window = deref(c.SlidingWindow, 0)
			}
			if q := c.QueryPreAttnScalar; q != nil && *q <= 0 {
				return a, fmt.Errorf("query_pre_attn_scalar %v must be positive", *q)
			}
			switch {
			case fam.Softcaps:
				at.Scale = float32(1 / math.Sqrt(deref(c.QueryPreAttnScalar, float64(headDim))))
				at.Softcap = float32(deref(c.AttnLogitSoftcapping, 0))
			case fam.Multipliers:
				// transformers' GraniteConfig defaults attention_multiplier to 1.
				at.Scale = float32(deref(c.AttentionMultiplier, 1))
			}
			at.QKNorm = fam.QKNorm
			switch fam.Bias {
			case family.BiasAlways:
				at.Bias = true
			case family.BiasConfig:
				at.Bias = deref(c.AttentionBias, false)
				at.OutBias = at.Bias && !fam.NoOutBias
			}
			at.OutputGate = fam.OutputGate
			at.Sinks = fam.Sinks
			l.Mixer = model.MixerAttention
			l.Attn = at
		case "conv":
			l.Mixer = model.MixerShortConv
			l.Conv = &model.ShortConv{Kernel: deref(c.ConvLCache, 3)}
		case "linear_attention":
			l.Mixer = model.MixerGatedDelta
			l.Delta = &model.GatedDelta{
				KeyHeads:   deref(c.LinearNumKeyHeads, 16),
				ValueHeads: deref(c.LinearNumValueHeads, 32),
				KeyDim:     deref(c.LinearKeyHeadDim, 128),
				ValueDim:   deref(c.LinearValueHeadDim, 128),
				ConvKernel: deref(c.LinearConvKernelDim, 4),
			}
			if d := l.Delta; d.KeyHeads <= 0 || d.ValueHeads <= 0 || d.ValueHeads%d.KeyHeads != 0 || d.KeyDim <= 0 || d.ValueDim <= 0 || d.ConvKernel <= 0 {
				return a, fmt.Errorf("layer %d: bad linear-attention dimensions (key heads %d, value heads %d, key dim %d, value dim %d, conv kernel %d): all must be positive, value heads a multiple of key heads", i, d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim, d.ConvKernel)
			}
		default:
			return a, fmt.Errorf("layer %d: layer type %q is not supported", i, types[i])
		}

		l.FFN = model.FFNDense
		l.FFNHidden = ffnHidden
		moeLayer := expertCount > 0 && !slices.Contains(c.MLPOnlyLayers, i) && sparseStep > 0 && (i+1)%sparseStep == 0
		if moeLayer {
			m := &model.MoE{
				Experts:  expertCount,
				TopK:     deref(c.NumExpertsPerTok, 2),
				NormTopK: true,
				Scoring:  "softmax",
			}
			switch fam.MoE {
			case family.MoEMixtral:
				m.ExpertHidden = c.IntermediateSize
			case family.MoEGptOss:
				// GptOssTopKRouter: affine router, top-k of its logits,
				// softmax over those; experts with biases.
				m.ExpertHidden = c.IntermediateSize
				m.Scoring, m.NormTopK, m.RouterBias, m.ExpertBias = "topk_softmax", false, true, true
			case family.MoEQwen:
				m.ExpertHidden = deref(c.MoeIntermediateSize, 0)
				// transformers' defaults: false for qwen2_moe and qwen3_moe, true for qwen3_next.
				m.NormTopK = deref(c.NormTopkProb, fam.NormTopK)
			default:
				return a, fmt.Errorf("layer %d: %d experts in a %s model", i, expertCount, fam.HF)
			}
			if fam.SharedExpert {
				m.SharedHidden = deref(c.SharedExpertIntermediateSize, 0)
				m.SharedGate = m.SharedHidden > 0
			}
			if m.ExpertHidden <= 0 || m.TopK <= 0 || m.TopK > m.Experts {
				return a, fmt.Errorf("layer %d: bad MoE configuration: %d experts, top %d, width %d", i, m.Experts, m.TopK, m.ExpertHidden)
			}
			l.FFN = model.FFNMoE
			l.FFNHidden = 0
			l.MoE = m
		}

		switch fam.Norms {
		case family.NormsSandwich:
			l.PreMixerNorm, l.PostMixerNorm, l.PreFFNNorm, l.PostFFNNorm = true, true, true, true
		case family.NormsPost:
			l.PostMixerNorm, l.PostFFNNorm = true, true
		default:
			l.PreMixerNorm, l.PreFFNNorm = true, true
		}
	}
	return a, a.Validate()
}

// hfLFM2FFDim reproduces transformers' Lfm2MLP width adjustment.
func hfLFM2FFDim(c *hfConfig) int {
	ff := c.IntermediateSize
	if c.BlockFFDim != nil {
		ff = *c.BlockFFDim // transformers prefers the original key
	}
	if deref(c.BlockAutoAdjustFFDim, false) {
		ff = int(float64(2*ff) / 3)
		if c.BlockFFNDimMultiplier != nil {
			ff = int(*c.BlockFFNDimMultiplier * float64(ff))
		}
		m := deref(c.BlockMultipleOf, 256)
		if m > 0 {
			ff = m * ((ff + m - 1) / m)
		}
	}
	return ff
}

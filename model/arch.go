// Package model is the engine's normalized description of a causal language
// model: an Arch (what each layer computes, with every scalar the math needs)
// plus a set of weights under canonical tensor names. Importers (Hugging Face,
// GGUF, CMF) produce a Model; backends (cpu, webgpu) read one and never look at
// source-format names or config keys.
package model

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/tensor"
)

// Mixer is a layer's token mixer.
type Mixer string

const (
	MixerAttention  Mixer = "attention"   // softmax attention with a KV cache
	MixerShortConv  Mixer = "short_conv"  // LFM2 gated depthwise causal conv
	MixerGatedDelta Mixer = "gated_delta" // qwen3_next gated DeltaNet
)

// FFNKind is a layer's feed-forward block.
type FFNKind string

const (
	FFNDense FFNKind = "dense" // act(gate(x)) * up(x) -> down
	FFNMoE   FFNKind = "moe"   // routed experts (+ optional shared expert)
)

// Activation of the gated FFN.
type Activation string

const (
	ActSiLU     Activation = "silu"
	ActGELUTanh Activation = "gelu_tanh"
	// ActSwiGLUOAI is gpt-oss's clamped SwiGLU: g = min(gate, limit),
	// u = clamp(up, -limit, limit), out = (u+1) * g*sigmoid(alpha*g), with
	// Arch.SwiGLULimit and Arch.SwiGLUAlpha.
	ActSwiGLUOAI Activation = "swiglu_oai"
)

// NormKind says how RMSNorm applies its weight.
type NormKind string

const (
	NormRMS        NormKind = "rms"          // x/rms * w
	NormRMSPlusOne NormKind = "rms_plus_one" // x/rms * (1+w)   (Gemma)
)

// RopeStyle says which element pairs a rotary embedding rotates.
type RopeStyle string

const (
	RopeNeoX        RopeStyle = "neox"        // (i, i+d/2) pairs: HF rotate_half
	RopeInterleaved RopeStyle = "interleaved" // (2i, 2i+1) pairs: llama2.c / GGUF "NORM"
)

// QKNorm says whether and how q and k are RMS-normalized before RoPE.
type QKNorm string

const (
	QKNormNone    QKNorm = ""
	QKNormPerHead QKNorm = "per_head" // weight [head_dim], applied per head (qwen3, gemma3)
	QKNormFull    QKNorm = "full"     // weight [heads*head_dim], over the whole projection (olmo2)
)

// RopeScaling is the frequency scaling applied to the rotary base.
type RopeScaling struct {
	Type            string  `json:"type,omitempty"` // "", "linear", "llama3", "yarn"
	Factor          float64 `json:"factor,omitempty"`
	LowFreqFactor   float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor  float64 `json:"high_freq_factor,omitempty"`
	OriginalContext int     `json:"original_context,omitempty"`
	BetaFast        float64 `json:"beta_fast,omitempty"`
	BetaSlow        float64 `json:"beta_slow,omitempty"`
	AttnFactor      float64 `json:"attn_factor,omitempty"`
	// NoTruncate keeps YaRN's correction range unrounded (transformers'
	// rope_parameters truncate=false, gpt-oss); the default floors and ceils it.
	NoTruncate bool `json:"no_truncate,omitempty"`
}

// Rope is the rotary embedding of one attention layer.
type Rope struct {
	Theta   float64     `json:"theta"`
	Dims    int         `json:"dims"` // rotated dims per head (< head_dim for partial rotary); 0 = no RoPE (NoPE layer)
	Style   RopeStyle   `json:"style"`
	Scaling RopeScaling `json:"scaling,omitzero"`
}

// Attention is the spec of a softmax-attention mixer.
type Attention struct {
	Heads   int  `json:"heads"`
	KVHeads int  `json:"kv_heads"`
	HeadDim int  `json:"head_dim"`
	Rope    Rope `json:"rope"`
	// Scale multiplies q·k (1/sqrt(head_dim) usually; gemma2/3 use
	// query_pre_attn_scalar, granite attention_multiplier).
	Scale float32 `json:"scale"`
	// Window > 0 limits attention to the last Window positions (inclusive of
	// the current one), as HF's sliding window does.
	Window  int     `json:"window,omitempty"`
	Softcap float32 `json:"softcap,omitempty"` // tanh softcap on scores (gemma2), 0 = none
	QKNorm  QKNorm  `json:"qk_norm,omitempty"`
	Bias    bool    `json:"bias,omitempty"` // q/k/v projections have biases (qwen2)
	OutBias bool    `json:"out_bias,omitempty"`
	// OutputGate: q_proj is twice as wide, the second half gates the
	// attention output through a sigmoid (qwen3_next).
	OutputGate bool `json:"output_gate,omitempty"`
	// Sinks: a learned per-head logit (attn_sinks.weight [heads]) joins each
	// softmax's denominator and is then dropped (gpt-oss).
	Sinks bool `json:"sinks,omitempty"`
}

// ShortConv is LFM2's gated short convolution.
type ShortConv struct {
	Kernel int `json:"kernel"` // conv kernel length (conv_L_cache)
}

// GatedDelta is qwen3_next's gated DeltaNet.
type GatedDelta struct {
	KeyHeads   int `json:"key_heads"`
	ValueHeads int `json:"value_heads"`
	KeyDim     int `json:"key_dim"`   // per head
	ValueDim   int `json:"value_dim"` // per head
	ConvKernel int `json:"conv_kernel"`
}

// MoE is the spec of a routed mixture-of-experts FFN.
type MoE struct {
	Experts      int  `json:"experts"`
	TopK         int  `json:"top_k"`
	ExpertHidden int  `json:"expert_hidden"`
	NormTopK     bool `json:"norm_top_k"` // renormalize the selected weights to sum 1
	// Scoring: "softmax" or "sigmoid" over all experts, then top-k; or
	// "topk_softmax": top-k of the raw logits, softmax over those k (gpt-oss).
	Scoring     string  `json:"scoring"`
	RoutedScale float32 `json:"routed_scale,omitempty"` // multiplies routed output; 0 means 1
	SelectBias  bool    `json:"select_bias,omitempty"`  // a per-expert bias added for selection only
	RouterBias  bool    `json:"router_bias,omitempty"`  // the router is affine (ffn_gate_inp.bias), bias part of the logits
	ExpertBias  bool    `json:"expert_bias,omitempty"`  // every expert projection has a bias (ffn_{gate,up,down}_exps.bias [E, out])
	// Shared expert: SharedHidden > 0 adds an always-on expert; SharedGate
	// scales it by sigmoid(w·x) (Qwen).
	SharedHidden int  `json:"shared_hidden,omitempty"`
	SharedGate   bool `json:"shared_gate,omitempty"`
}

// Layer is everything one decoder layer computes.
//
// Residual wiring, in order:
//
//	h = x; if PreMixerNorm { h = norm(h) }; h = mixer(h); if PostMixerNorm { h = norm(h) }
//	x = x + ResidualScale*h
//	h = x; if PreFFNNorm { h = norm(h) }; h = ffn(h); if PostFFNNorm { h = norm(h) }
//	x = x + ResidualScale*h
//
// Llama: pre norms only. Gemma2/3: all four (sandwich). Olmo2: post norms only.
type Layer struct {
	Mixer     Mixer       `json:"mixer"`
	Attn      *Attention  `json:"attn,omitempty"`
	Conv      *ShortConv  `json:"conv,omitempty"`
	Delta     *GatedDelta `json:"delta,omitempty"`
	FFN       FFNKind     `json:"ffn"`
	FFNHidden int         `json:"ffn_hidden,omitempty"` // dense FFN width
	MoE       *MoE        `json:"moe,omitempty"`

	PreMixerNorm  bool `json:"pre_mixer_norm"`
	PostMixerNorm bool `json:"post_mixer_norm,omitempty"`
	PreFFNNorm    bool `json:"pre_ffn_norm"`
	PostFFNNorm   bool `json:"post_ffn_norm,omitempty"`
}

// Arch is the normalized architecture of a model.
type Arch struct {
	Family         string     `json:"family"` // source model_type, informative ("llama", "gemma2", ...)
	Vocab          int        `json:"vocab"`
	Hidden         int        `json:"hidden"`
	Context        int        `json:"context"` // max positions the model was configured for
	NormEps        float32    `json:"norm_eps"`
	Norm           NormKind   `json:"norm"`
	Act            Activation `json:"act"`
	EmbedScale     float32    `json:"embed_scale"`    // embeddings are multiplied by this (1 usually; sqrt(hidden) for gemma; granite embedding_multiplier)
	ResidualScale  float32    `json:"residual_scale"` // branch outputs are multiplied by this before the residual add (granite; 1 usually)
	LogitScale     float32    `json:"logit_scale"`    // logits are multiplied by this (1/logits_scaling for granite; 1 usually)
	FinalSoftcap   float32    `json:"final_softcap,omitempty"`
	SwiGLULimit    float32    `json:"swiglu_limit,omitempty"` // ActSwiGLUOAI's clamp
	SwiGLUAlpha    float32    `json:"swiglu_alpha,omitempty"` // ActSwiGLUOAI's sigmoid slope
	TiedEmbeddings bool       `json:"tied_embeddings"`        // lm_head reuses token_embd (output.weight absent)
	BOS            int        `json:"bos"`                    // -1 when none
	EOS            []int      `json:"eos,omitempty"`
	Layers         []Layer    `json:"layers"`
}

// Limits on sizes Validate accepts: far above any real model, low enough
// that no product of two of them overflows an int or a float32 index.
const (
	maxDim     = 1 << 24 // vocab, hidden, widths, heads, head dims, kernels
	maxContext = 1 << 31
)

// Validate checks the internal consistency an engine relies on, and that
// every number is one the forward pass can use: sizes positive and bounded,
// epsilons and scales finite (an epsilon and an attention scale positive;
// an embedding, residual or logit scale of 0 means 1), rope bases finite
// and positive. A NaN or zero epsilon, say, would make every logit NaN, and
// greedy decoding would then emit token 0 forever.
func (a *Arch) Validate() error {
	if a.Vocab <= 0 || a.Hidden <= 0 || len(a.Layers) == 0 {
		return fmt.Errorf("model: arch %q: vocab %d, hidden %d, %d layers: all must be positive", a.Family, a.Vocab, a.Hidden, len(a.Layers))
	}
	if a.Vocab > maxDim || a.Hidden > maxDim || len(a.Layers) > maxDim {
		return fmt.Errorf("model: arch %q: vocab %d, hidden %d, %d layers: at most %d each", a.Family, a.Vocab, a.Hidden, len(a.Layers), maxDim)
	}
	if a.Context < 0 || a.Context > maxContext {
		return fmt.Errorf("model: context %d: must be in [0, %d]", a.Context, maxContext)
	}
	if !finite(float64(a.NormEps)) || a.NormEps <= 0 || a.NormEps >= 1 {
		return fmt.Errorf("model: norm epsilon %g: must be a finite number in (0, 1)", a.NormEps)
	}
	for _, s := range []struct {
		name string
		v    float32
	}{{"embedding scale", a.EmbedScale}, {"residual scale", a.ResidualScale}, {"logit scale", a.LogitScale}} {
		// 0 means 1 to the backends (an arch written without the field).
		if !finite(float64(s.v)) {
			return fmt.Errorf("model: %s %g: must be finite", s.name, s.v)
		}
	}
	if !finite(float64(a.FinalSoftcap)) || a.FinalSoftcap < 0 {
		return fmt.Errorf("model: final logit softcap %g: must be finite, 0 (none) or positive", a.FinalSoftcap)
	}
	if a.BOS < -1 {
		return fmt.Errorf("model: BOS id %d", a.BOS)
	}
	for _, id := range a.EOS {
		if id < 0 {
			return fmt.Errorf("model: EOS id %d", id)
		}
	}
	for i := range a.Layers {
		if err := a.Layers[i].validate(a.Hidden); err != nil {
			return fmt.Errorf("model: layer %d: %w", i, err)
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// dims checks that every named size is in [1, maxDim].
func dims(kv ...any) error {
	for k := 0; k+1 < len(kv); k += 2 {
		if v := kv[k+1].(int); v <= 0 || v > maxDim {
			return fmt.Errorf("%s %d: must be in [1, %d]", kv[k], v, maxDim)
		}
	}
	return nil
}

func (l *Layer) validate(hidden int) error {
	switch l.Mixer {
	case MixerAttention:
		at := l.Attn
		if at == nil {
			return fmt.Errorf("attention layer without an attention spec")
		}
		if err := dims("heads", at.Heads, "kv heads", at.KVHeads, "head dim", at.HeadDim); err != nil {
			return fmt.Errorf("attention: %w", err)
		}
		if at.Heads%at.KVHeads != 0 {
			return fmt.Errorf("attention: %d heads is not a multiple of %d kv heads", at.Heads, at.KVHeads)
		}
		if at.Rope.Dims < 0 || at.Rope.Dims > at.HeadDim || at.Rope.Dims%2 != 0 {
			return fmt.Errorf("rope dims %d for head_dim %d", at.Rope.Dims, at.HeadDim)
		}
		if at.Rope.Dims > 0 && (!finite(at.Rope.Theta) || at.Rope.Theta <= 0) {
			return fmt.Errorf("rope theta %g: must be finite and positive", at.Rope.Theta)
		}
		sc := &at.Rope.Scaling
		for _, f := range []struct {
			name string
			v    float64
		}{{"factor", sc.Factor}, {"low_freq_factor", sc.LowFreqFactor}, {"high_freq_factor", sc.HighFreqFactor}, {"beta_fast", sc.BetaFast}, {"beta_slow", sc.BetaSlow}, {"attn_factor", sc.AttnFactor}} {
			if !finite(f.v) || f.v < 0 {
				return fmt.Errorf("rope scaling %s %g: must be finite and not negative", f.name, f.v)
			}
		}
		if sc.Type != "" && sc.Factor <= 0 {
			return fmt.Errorf("rope scaling %q with factor %g: must be positive", sc.Type, sc.Factor)
		}
		if sc.OriginalContext < 0 {
			return fmt.Errorf("rope scaling original context %d", sc.OriginalContext)
		}
		if !finite(float64(at.Scale)) || at.Scale <= 0 {
			return fmt.Errorf("attention scale %g: must be finite and positive", at.Scale)
		}
		if at.Window < 0 {
			return fmt.Errorf("attention window %d", at.Window)
		}
		if !finite(float64(at.Softcap)) || at.Softcap < 0 {
			return fmt.Errorf("attention softcap %g: must be finite, 0 (none) or positive", at.Softcap)
		}
	case MixerShortConv:
		if l.Conv == nil {
			return fmt.Errorf("short-conv layer without a short-conv spec")
		}
		if err := dims("short-conv kernel", l.Conv.Kernel); err != nil {
			return err
		}
	case MixerGatedDelta:
		d := l.Delta
		if d == nil {
			return fmt.Errorf("gated-delta layer without a gated-delta spec")
		}
		if err := dims("key heads", d.KeyHeads, "value heads", d.ValueHeads, "key dim", d.KeyDim, "value dim", d.ValueDim, "conv kernel", d.ConvKernel); err != nil {
			return fmt.Errorf("gated delta: %w", err)
		}
		if d.ValueHeads%d.KeyHeads != 0 {
			return fmt.Errorf("gated delta: %d value heads is not a multiple of %d key heads", d.ValueHeads, d.KeyHeads)
		}
	default:
		return fmt.Errorf("unknown mixer %q", l.Mixer)
	}
	switch l.FFN {
	case FFNDense:
		if err := dims("dense FFN width", l.FFNHidden); err != nil {
			return err
		}
	case FFNMoE:
		m := l.MoE
		if m == nil {
			return fmt.Errorf("MoE layer without a MoE spec")
		}
		if err := dims("experts", m.Experts, "experts per token", m.TopK, "expert width", m.ExpertHidden); err != nil {
			return fmt.Errorf("MoE: %w", err)
		}
		if m.TopK > m.Experts {
			return fmt.Errorf("MoE: %d experts per token of %d", m.TopK, m.Experts)
		}
		if m.SharedHidden < 0 || m.SharedHidden > maxDim {
			return fmt.Errorf("MoE: shared expert width %d", m.SharedHidden)
		}
		if !finite(float64(m.RoutedScale)) || m.RoutedScale < 0 {
			return fmt.Errorf("MoE: routed scale %g: must be finite and not negative", m.RoutedScale)
		}
	default:
		return fmt.Errorf("unknown FFN %q", l.FFN)
	}
	return nil
}

// Weights looks tensors up by canonical name (see names.go).
type Weights interface {
	Tensor(name string) (*tensor.Tensor, bool)
	Names() []string
}

// WeightsErr returns the error behind w's failed Tensor lookups (a read
// error, a checksum mismatch) when w records one through the optional method
// Err() error, as weights read or checked on demand do; nil otherwise.
func WeightsErr(w Weights) error {
	if e, ok := w.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

// Model is an architecture with its weights and, when the source carried
// one, its tokenizer.
type Model struct {
	Arch    Arch
	Weights Weights
	// Tokenizer holds the source's tokenizer material, kept as opaque
	// documents for the tokenizer package: HF tokenizer.json (+ config), or
	// a GGUF vocabulary serialized as JSON.
	Tokenizer *TokenizerData
	// Source describes where the model came from (paths, sha256), for CMF provenance.
	Source Provenance
	// Close releases the mapping or files behind Weights.
	Close func() error
}

// TokenizerData is the tokenizer material a model carries.
type TokenizerData struct {
	Kind string `json:"kind"` // "hf" (tokenizer.json) or "gguf" (GGUF tokenizer.* metadata as JSON)
	// Files maps a file name (tokenizer.json, tokenizer_config.json,
	// generation_config.json, gguf_vocab.json) to its bytes.
	Files map[string][]byte `json:"files"`
}

// Provenance lists the source files of an import with their digests.
type Provenance struct {
	Format string       `json:"format"` // "hf", "gguf", "cmf"
	Files  []SourceFile `json:"files"`
	// Dir is where the files are on this machine. Importers record names
	// and sizes only; digests are computed from Dir when a CMF is written
	// (hashing gigabytes on every open would be wasted work). Never
	// serialized: a local path is not provenance.
	Dir string `json:"-"`
}

// SourceFile is one input file of an import.
type SourceFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// MapWeights is an in-memory Weights.
type MapWeights map[string]*tensor.Tensor

func (m MapWeights) Tensor(name string) (*tensor.Tensor, bool) { t, ok := m[name]; return t, ok }

func (m MapWeights) Names() []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	return names
}

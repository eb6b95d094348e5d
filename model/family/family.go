// Package family holds one record per model family the importers know: the
// names a family goes by (a Hugging Face model_type, a GGUF
// general.architecture, the GGUF architecture it is written as), its traits
// in the vocabulary of model.Arch (norm kind, RoPE layout, biases, scales,
// qk-norm, MoE routing, layer patterns), where its Hugging Face tensors live,
// and the few quirks that are no trait (a hook on the derived Arch).
//
// The records are data, read by the HF and GGUF importers and by the GGUF
// writer; none of them branches on a family's name. Adding a family that is
// llama-like in every other respect is one record here plus a fixture (a
// reference in ../shared/fixtures/tiny). The package sits beside model, not
// inside importer, because the writer (package writer) reads the same
// records, and it imports nothing but model so that every format package
// may depend on it.
//
// The pre-tokenizer is not a family trait: llama.cpp chooses it from
// tokenizer.ggml.pre and Hugging Face from tokenizer.json, so package
// tokenizer needs no record.
package family

import (
	"math"

	"github.com/cortiq/cortiq/model"
)

// Family describes one model family. The zero value of every trait is the
// llama behaviour, so a llama-like record names only what differs.
type Family struct {
	// HF is the config.json model_type ("" for a family only GGUF files
	// name). It is also Arch.Family for a Hugging Face import.
	HF string
	// GGUF is the general.architecture FromGGUF reads as this family ("" if
	// none); it is Arch.Family for a GGUF import.
	GGUF string
	// GGUFOut is the architecture the GGUF writer writes the family as, ""
	// when it has no GGUF form the writer supports.
	GGUFOut string
	// GGUFRope is the RoPE pairing of the family's GGUF files: llama.cpp's
	// converter permutes the q/k rows of "llama" (and "mistral") so that
	// interleaved pairs apply; the others keep rotate-half (NeoX).
	GGUFRope model.RopeStyle

	// HFWrapper is the model_type of a multimodal config.json that keeps
	// this family's keys in text_config (its vision tower is ignored).
	HFWrapper string

	// Norm is the RMS-norm convention ((1+w) for Gemma and qwen3_next). GGUF
	// files never use RMSPlusOne: llama.cpp's converter adds the 1.
	Norm model.NormKind
	// Norms says which of the four sub-layer norms the family has.
	Norms NormPlacement
	// GemmaMLP: the activation is hidden_activation, an absent or plain
	// "gelu" meaning the tanh approximation, and the embedding is scaled by
	// sqrt(hidden) (in GGUF files too).
	GemmaMLP bool
	// Act, when set, is the activation whatever the config says, with
	// SwiGLULimit and SwiGLUAlpha (gpt-oss's clamped SwiGLU).
	Act                      model.Activation
	SwiGLULimit, SwiGLUAlpha float32
	// Multipliers: granite's embedding_multiplier, residual_multiplier,
	// attention_multiplier and logits_scaling.
	Multipliers bool
	// Softcaps: final_logit_softcapping, attn_logit_softcapping and
	// query_pre_attn_scalar (Gemma 2 and 3).
	Softcaps bool

	// Bias says whether q/k/v have biases.
	Bias BiasRule
	// NoOutBias: the output projection never has a bias, whatever
	// attention_bias says.
	NoOutBias bool
	// QKNorm is the q/k normalization.
	QKNorm model.QKNorm
	// OutputGate: q_proj also yields a sigmoid gate of the attention output.
	OutputGate bool
	// Sinks: per-head attention sinks.
	Sinks bool

	// Layers is the pattern of layer types when config.json has no
	// layer_types.
	Layers LayerPattern
	// NoRopeEvery: without no_rope_layers, every n-th layer (the config's
	// no_rope_layer_interval, default NoRopeEvery) has no RoPE.
	NoRopeEvery int
	// Rope says where the family keeps its RoPE base.
	Rope RopeKind
	// LFM2FFN: the FFN width follows LFM2's block_* adjustment.
	LFM2FFN bool

	// MoE is how routed experts are configured; MoENone refuses experts.
	MoE MoEKind
	// NormTopK is the default of norm_topk_prob (qwen-style MoE).
	NormTopK bool
	// SharedExpert: a shared expert with a sigmoid gate
	// (shared_expert_intermediate_size).
	SharedExpert bool

	// Tensors are the Hugging Face tensor names.
	Tensors HFTensors

	// GGUFSliding says which layers of a GGUF file use
	// attention.sliding_window.
	GGUFSliding SlidingPattern
	// GGUFNoNormTopK: llama.cpp does not renormalize the selected experts'
	// weights (unless expert_weights_norm says so).
	GGUFNoNormTopK bool
	// GGUFRouter is the MoE scoring of GGUF files ("" = "softmax" with
	// renormalization).
	GGUFRouter string
	// GGUFYarnMscale: llama.cpp multiplies YaRN's attn_factor by
	// 1+0.1·ln(factor) (transformers' default attention factor), and the
	// rotation is not truncated (gpt-oss).
	GGUFYarnMscale bool
	// GGUFFusedSplit: q/k/v are fused in attn_qkv and gate/up in ffn_up
	// (Phi-3).
	GGUFFusedSplit bool
	// GGUFFFNNorm is the name llama.cpp gives the pre-FFN norm when it is
	// not model.FFNNorm (gpt-oss's post_attention_norm).
	GGUFFFNNorm string
	// GGUFQuirk, when set, adjusts the Arch read from a GGUF file after the
	// traits above (what llama.cpp decides by something other than
	// metadata).
	GGUFQuirk func(a *model.Arch)
}

// NormPlacement says which sub-layer norms a family has.
type NormPlacement int

const (
	NormsPre      NormPlacement = iota // before the mixer and before the FFN (llama)
	NormsSandwich                      // before and after each (Gemma 2 and 3)
	NormsPost                          // after each (OLMo 2)
)

// BiasRule says whether q/k/v have biases.
type BiasRule int

const (
	BiasNone   BiasRule = iota // none required (a checkpoint that has them keeps them)
	BiasConfig                 // as attention_bias says
	BiasAlways                 // always (Qwen 2)
)

// LayerPattern is a family's default arrangement of layer types.
type LayerPattern int

const (
	LayersFull              LayerPattern = iota // every layer full attention
	LayersAlternate                             // sliding first, then alternating (Gemma 2)
	LayersSlidingPattern                        // all sliding but every sliding_window_pattern-th (default 6; Gemma 3)
	LayersMaxWindow                             // with use_sliding_window: sliding from max_window_layers on (Qwen)
	LayersAllSliding                            // every layer sliding when sliding_window is set (Mistral)
	LayersConvFullIdxs                          // short convs but full_attn_idxs (LFM2)
	LayersLinearInterval                        // linear attention but every full_attention_interval-th (default 4; qwen3_next)
	LayersAlternateIfWindow                     // LayersAlternate when sliding_window is set (gpt-oss)
)

// RopeKind says where a family keeps its RoPE base.
type RopeKind int

const (
	RopeDefault RopeKind = iota // rope_theta, default 10000
	RopeLocal                   // full layers default 1e6; sliding layers use rope_local_base_freq (Gemma 3)
	RopeTheta                   // the key "theta", default 1e6 (LFM2)
)

// MoEKind says how a family configures routed experts.
type MoEKind int

const (
	MoENone    MoEKind = iota // experts are refused
	MoEMixtral                // intermediate_size wide, softmax then renormalize
	MoEQwen                   // moe_intermediate_size wide, norm_topk_prob (default NormTopK)
	MoEGptOss                 // affine router, softmax over the top-k logits, expert biases
)

// SlidingPattern says which layers of a GGUF file slide.
type SlidingPattern int

const (
	SlideAll    SlidingPattern = iota // every layer, when a window is set
	SlideEven                         // even layers (llama.cpp's swa pattern 2)
	SlideGemma3                       // all but every sixth, with rope.freq_base_swa and no scaling
)

// HFTensors are a family's Hugging Face tensor names, relative to the
// model prefix ("model.") for FinalNorm and to "layers.N." otherwise. An
// empty field means the llama name.
type HFTensors struct {
	FinalNorm string // "norm.weight"
	AttnNorm  string // "input_layernorm.weight"
	FFNNorm   string // "post_attention_layernorm.weight"
	AttnOut   string // "self_attn.o_proj.weight"
	QNorm     string // "self_attn.q_norm.weight"
	KNorm     string // "self_attn.k_norm.weight"
	// FusedQKV is q/k/v stacked in one tensor ("" = separate q/k/v_proj).
	FusedQKV string
	// FusedGateUp is gate and up stacked in one tensor ("" = separate).
	FusedGateUp string
	Gate        string // "mlp.gate_proj.weight"
	Up          string // "mlp.up_proj.weight"
	Down        string // "mlp.down_proj.weight"
	// MoEBlock prefixes the router ("gate.weight") and experts ("mlp.").
	MoEBlock string
	// Experts names the per-expert gate, up and down projections
	// ("gate_proj", "up_proj", "down_proj").
	Experts [3]string
}

// llamaTensors are the names every field of HFTensors defaults to.
var llamaTensors = HFTensors{
	FinalNorm: "norm.weight",
	AttnNorm:  "input_layernorm.weight",
	FFNNorm:   "post_attention_layernorm.weight",
	AttnOut:   "self_attn.o_proj.weight",
	QNorm:     "self_attn.q_norm.weight",
	KNorm:     "self_attn.k_norm.weight",
	Gate:      "mlp.gate_proj.weight",
	Up:        "mlp.up_proj.weight",
	Down:      "mlp.down_proj.weight",
	MoEBlock:  "mlp.",
	Experts:   [3]string{"gate_proj", "up_proj", "down_proj"},
}

// Names returns t with every empty field set to the llama name.
func (t HFTensors) Names() HFTensors {
	d := llamaTensors
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&d.FinalNorm, t.FinalNorm)
	set(&d.AttnNorm, t.AttnNorm)
	set(&d.FFNNorm, t.FFNNorm)
	set(&d.AttnOut, t.AttnOut)
	set(&d.QNorm, t.QNorm)
	set(&d.KNorm, t.KNorm)
	set(&d.FusedQKV, t.FusedQKV)
	set(&d.FusedGateUp, t.FusedGateUp)
	set(&d.Gate, t.Gate)
	set(&d.Up, t.Up)
	set(&d.Down, t.Down)
	set(&d.MoEBlock, t.MoEBlock)
	for i, e := range t.Experts {
		set(&d.Experts[i], e)
	}
	return d
}

// gemma27BScale is llama.cpp's query scale for the 27B Gemma 2 and 3
// models: 1/sqrt(hidden/heads) (their query_pre_attn_scalar, which GGUF does
// not store), recognized by the layer count.
func gemma27BScale(layers int) func(*model.Arch) {
	return func(a *model.Arch) {
		if len(a.Layers) != layers {
			return
		}
		for _, l := range a.Layers {
			if at := l.Attn; at != nil {
				at.Scale = float32(1 / math.Sqrt(float64(a.Hidden/at.Heads)))
			}
		}
	}
}

// gpt-oss's clamped SwiGLU, the same in its HF and GGUF forms.
const gptOssLimit, gptOssAlpha = 7.0, 1.702

// All is every family, in the order error messages list them.
var All = []*Family{
	{HF: "llama", GGUF: "llama", GGUFOut: "llama", GGUFRope: model.RopeInterleaved, Bias: BiasConfig},
	{HF: "mistral", GGUF: "mistral", GGUFOut: "llama", GGUFRope: model.RopeInterleaved, Layers: LayersAllSliding},
	{HF: "qwen2", GGUF: "qwen2", GGUFOut: "qwen2", Bias: BiasAlways, Layers: LayersMaxWindow},
	{HF: "qwen3", GGUF: "qwen3", GGUFOut: "qwen3", Bias: BiasConfig, NoOutBias: true, QKNorm: model.QKNormPerHead, Layers: LayersMaxWindow},
	{HF: "gemma", GGUF: "gemma", GGUFOut: "gemma", Norm: model.NormRMSPlusOne, GemmaMLP: true, Bias: BiasConfig},
	{HF: "gemma2", GGUF: "gemma2", GGUFOut: "gemma2", Norm: model.NormRMSPlusOne, GemmaMLP: true, Softcaps: true,
		Bias: BiasConfig, Norms: NormsSandwich, Layers: LayersAlternate,
		Tensors:     HFTensors{FFNNorm: "pre_feedforward_layernorm.weight"},
		GGUFSliding: SlideEven, GGUFQuirk: gemma27BScale(46)},
	{HF: "gemma3_text", GGUF: "gemma3", GGUFOut: "gemma3", HFWrapper: "gemma3", Norm: model.NormRMSPlusOne,
		GemmaMLP: true, Softcaps: true, Bias: BiasConfig, NoOutBias: true, QKNorm: model.QKNormPerHead,
		Norms: NormsSandwich, Layers: LayersSlidingPattern, Rope: RopeLocal,
		Tensors:     HFTensors{FFNNorm: "pre_feedforward_layernorm.weight"},
		GGUFSliding: SlideGemma3, GGUFQuirk: gemma27BScale(62)},
	{HF: "phi3", GGUF: "phi3", GGUFOut: "phi3", Layers: LayersAllSliding,
		Tensors:        HFTensors{FusedQKV: "self_attn.qkv_proj.weight", FusedGateUp: "mlp.gate_up_proj.weight"},
		GGUFFusedSplit: true},
	{HF: "granite", Bias: BiasConfig, Multipliers: true},
	{HF: "olmo2", Bias: BiasConfig, QKNorm: model.QKNormFull, Norms: NormsPost},
	{HF: "smollm3", Bias: BiasConfig, Layers: LayersMaxWindow, NoRopeEvery: 4},
	{HF: "qwen2_moe", GGUF: "qwen2moe", Bias: BiasAlways, Layers: LayersMaxWindow, MoE: MoEQwen, SharedExpert: true,
		GGUFNoNormTopK: true},
	{HF: "qwen3_moe", GGUF: "qwen3moe", Bias: BiasConfig, NoOutBias: true, QKNorm: model.QKNormPerHead,
		Layers: LayersMaxWindow, MoE: MoEQwen},
	{HF: "mixtral", Layers: LayersAllSliding, MoE: MoEMixtral,
		Tensors: HFTensors{MoEBlock: "block_sparse_moe.", Experts: [3]string{"w1", "w3", "w2"}}},
	{HF: "lfm2", QKNorm: model.QKNormPerHead, Layers: LayersConvFullIdxs, Rope: RopeTheta, LFM2FFN: true,
		Tensors: HFTensors{FinalNorm: "embedding_norm.weight", AttnNorm: "operator_norm.weight", FFNNorm: "ffn_norm.weight",
			AttnOut: "self_attn.out_proj.weight", QNorm: "self_attn.q_layernorm.weight", KNorm: "self_attn.k_layernorm.weight",
			Gate: "feed_forward.w1.weight", Up: "feed_forward.w3.weight", Down: "feed_forward.w2.weight"}},
	{HF: "qwen3_next", Norm: model.NormRMSPlusOne, Bias: BiasConfig, NoOutBias: true, QKNorm: model.QKNormPerHead,
		OutputGate: true, Layers: LayersLinearInterval, MoE: MoEQwen, NormTopK: true, SharedExpert: true},
	{HF: "gpt_oss", GGUF: "gpt-oss", GGUFOut: "gpt-oss", Act: model.ActSwiGLUOAI, SwiGLULimit: gptOssLimit, SwiGLUAlpha: gptOssAlpha,
		Bias: BiasConfig, Sinks: true, Layers: LayersAlternateIfWindow, MoE: MoEGptOss,
		GGUFSliding: SlideEven, GGUFRouter: "topk_softmax", GGUFYarnMscale: true, GGUFFFNNorm: model.PostAttnNorm},
}

// HF returns the family of a config.json model_type.
func HF(modelType string) (*Family, bool) {
	for _, f := range All {
		if f.HF != "" && f.HF == modelType {
			return f, true
		}
	}
	return nil, false
}

// GGUF returns the family of a GGUF general.architecture.
func GGUF(arch string) (*Family, bool) {
	for _, f := range All {
		if f.GGUF != "" && f.GGUF == arch {
			return f, true
		}
	}
	return nil, false
}

// Of returns the family of an Arch.Family, which is a model_type or a GGUF
// architecture.
func Of(name string) (*Family, bool) {
	if f, ok := HF(name); ok {
		return f, true
	}
	return GGUF(name)
}

// HFNames lists the model_types, for error messages.
func HFNames() []string { return names(func(f *Family) string { return f.HF }) }

// GGUFNames lists the GGUF architectures read, for error messages.
func GGUFNames() []string { return names(func(f *Family) string { return f.GGUF }) }

// GGUFOutNames lists the families the GGUF writer writes, for error
// messages.
func GGUFOutNames() []string {
	return names(func(f *Family) string {
		if f.GGUFOut == "" {
			return ""
		}
		return f.HF
	})
}

func names(get func(*Family) string) []string {
	var out []string
	for _, f := range All {
		if n := get(f); n != "" {
			out = append(out, n)
		}
	}
	return out
}

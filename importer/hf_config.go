package importer

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/model/family"
)

// hfConfig is the union of the config.json keys the supported families use.
// Pointers distinguish "absent or null" from zero.
type hfConfig struct {
	ModelType     string   `json:"model_type"`
	Architectures []string `json:"architectures"`

	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      *int     `json:"num_key_value_heads"`
	HeadDim               *int     `json:"head_dim"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RMSNormEps            *float64 `json:"rms_norm_eps"`
	NormEps               *float64 `json:"norm_eps"`
	HiddenAct             string   `json:"hidden_act"`
	HiddenActivation      string   `json:"hidden_activation"`
	TieWordEmbeddings     *bool    `json:"tie_word_embeddings"`
	AttentionBias         *bool    `json:"attention_bias"`
	MLPBias               *bool    `json:"mlp_bias"`

	BosTokenID json.RawMessage `json:"bos_token_id"`
	EosTokenID json.RawMessage `json:"eos_token_id"`

	// RoPE, transformers-4 and -5 styles.
	RopeTheta           *float64        `json:"rope_theta"`
	RopeLocalBaseFreq   *float64        `json:"rope_local_base_freq"`
	RopeScaling         json.RawMessage `json:"rope_scaling"`
	RopeParameters      json.RawMessage `json:"rope_parameters"`
	PartialRotaryFactor *float64        `json:"partial_rotary_factor"`
	NoRopeLayers        []int           `json:"no_rope_layers"`
	NoRopeLayerInterval *int            `json:"no_rope_layer_interval"`

	// Attention pattern.
	SlidingWindow         *int     `json:"sliding_window"`
	UseSlidingWindow      *bool    `json:"use_sliding_window"`
	MaxWindowLayers       *int     `json:"max_window_layers"`
	LayerTypes            []string `json:"layer_types"`
	SlidingWindowPattern  *int     `json:"sliding_window_pattern"`
	SlidingWindowPattern5 *int     `json:"_sliding_window_pattern"`
	QueryPreAttnScalar    *float64 `json:"query_pre_attn_scalar"`
	AttnLogitSoftcapping  *float64 `json:"attn_logit_softcapping"`
	FinalLogitSoftcapping *float64 `json:"final_logit_softcapping"`
	FullAttentionInterval *int     `json:"full_attention_interval"`

	UseBidirectionalAttention *bool `json:"use_bidirectional_attention"`

	// Granite.
	EmbeddingMultiplier *float64 `json:"embedding_multiplier"`
	ResidualMultiplier  *float64 `json:"residual_multiplier"`
	AttentionMultiplier *float64 `json:"attention_multiplier"`
	LogitsScaling       *float64 `json:"logits_scaling"`

	// MoE.
	NumExperts                   *int  `json:"num_experts"`
	NumLocalExperts              *int  `json:"num_local_experts"`
	NumExpertsPerTok             *int  `json:"num_experts_per_tok"`
	MoeIntermediateSize          *int  `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize *int  `json:"shared_expert_intermediate_size"`
	DecoderSparseStep            *int  `json:"decoder_sparse_step"`
	MLPOnlyLayers                []int `json:"mlp_only_layers"`
	NormTopkProb                 *bool `json:"norm_topk_prob"`

	// LFM2.
	ConvLCache            *int     `json:"conv_L_cache"`
	ConvBias              *bool    `json:"conv_bias"`
	BlockAutoAdjustFFDim  *bool    `json:"block_auto_adjust_ff_dim"`
	BlockFFNDimMultiplier *float64 `json:"block_ffn_dim_multiplier"`
	BlockMultipleOf       *int     `json:"block_multiple_of"`
	BlockFFDim            *int     `json:"block_ff_dim"`
	FullAttnIdxs          []int    `json:"full_attn_idxs"`
	Theta                 *float64 `json:"theta"`         // LFM2's original key for rope_theta
	TieEmbedding          *bool    `json:"tie_embedding"` // LFM2's original key for tie_word_embeddings

	// Multimodal wrappers (gemma3) keep the language model's config here.
	TextConfig json.RawMessage `json:"text_config"`

	// qwen3_next gated DeltaNet.
	LinearConvKernelDim *int `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim    *int `json:"linear_key_head_dim"`
	LinearValueHeadDim  *int `json:"linear_value_head_dim"`
	LinearNumKeyHeads   *int `json:"linear_num_key_heads"`
	LinearNumValueHeads *int `json:"linear_num_value_heads"`
}

// hfRopeParams is one rope_parameters dict (or its transformers-4 pieces).
type hfRopeParams struct {
	RopeTheta           *float64 `json:"rope_theta"`
	RopeType            string   `json:"rope_type"`
	Type                string   `json:"type"`
	Factor              *float64 `json:"factor"`
	LowFreqFactor       *float64 `json:"low_freq_factor"`
	HighFreqFactor      *float64 `json:"high_freq_factor"`
	OriginalMaxPos      *int     `json:"original_max_position_embeddings"`
	BetaFast            *float64 `json:"beta_fast"`
	BetaSlow            *float64 `json:"beta_slow"`
	AttentionFactor     *float64 `json:"attention_factor"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	Mscale              *float64 `json:"mscale"`
	MscaleAllDim        *float64 `json:"mscale_all_dim"`
	Truncate            *bool    `json:"truncate"`
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// hfTokenIDs parses an id field that may be an int, a list of ints or null.
func hfTokenIDs(raw json.RawMessage) ([]int, error) {
	if isNull(raw) {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("token id %s is neither an int nor a list of ints", raw)
	}
	return many, nil
}

// hfRopeFor returns the rope parameters that apply to a layer of the given
// type ("full_attention", "sliding_attention").
func (c *hfConfig) hfRopeFor(fam *family.Family, layerType string) (hfRopeParams, error) {
	var p hfRopeParams
	if !isNull(c.RopeParameters) {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(c.RopeParameters, &probe); err != nil {
			return p, fmt.Errorf("rope_parameters: %w", err)
		}
		_, flat := probe["rope_theta"]
		_, flat2 := probe["rope_type"]
		if flat || flat2 {
			if err := json.Unmarshal(c.RopeParameters, &p); err != nil {
				return p, fmt.Errorf("rope_parameters: %w", err)
			}
		} else {
			sub, ok := probe[layerType]
			if !ok {
				return p, fmt.Errorf("rope_parameters has no entry for layer type %q", layerType)
			}
			if err := json.Unmarshal(sub, &p); err != nil {
				return p, fmt.Errorf("rope_parameters[%q]: %w", layerType, err)
			}
		}
	} else {
		// transformers 4: top-level rope_theta and rope_scaling; Gemma3's
		// local layers use rope_local_base_freq without scaling.
		if layerType == "sliding_attention" && fam.Rope == family.RopeLocal {
			base := deref(c.RopeLocalBaseFreq, 10000)
			p.RopeTheta = &base
		} else {
			if !isNull(c.RopeScaling) {
				if err := json.Unmarshal(c.RopeScaling, &p); err != nil {
					return p, fmt.Errorf("rope_scaling: %w", err)
				}
			}
			p.RopeTheta = c.RopeTheta
		}
	}
	if p.RopeTheta == nil && fam.Rope == family.RopeTheta {
		p.RopeTheta = c.Theta
	}
	if p.RopeTheta == nil {
		def := 10000.0
		if (fam.Rope == family.RopeLocal && layerType == "full_attention") || fam.Rope == family.RopeTheta {
			def = 1e6
		}
		p.RopeTheta = &def
	}
	if p.PartialRotaryFactor == nil {
		p.PartialRotaryFactor = c.PartialRotaryFactor
	}
	return p, nil
}

// hfRope converts rope parameters into a model.Rope for a head size.
func (c *hfConfig) hfRope(fam *family.Family, layerType string, headDim int) (model.Rope, error) {
	p, err := c.hfRopeFor(fam, layerType)
	if err != nil {
		return model.Rope{}, err
	}
	r := model.Rope{Theta: *p.RopeTheta, Dims: headDim, Style: model.RopeNeoX}
	if f := deref(p.PartialRotaryFactor, 1); f != 1 {
		if f <= 0 || f > 1 {
			return r, fmt.Errorf("partial_rotary_factor %v out of (0, 1]", f)
		}
		r.Dims = int(float64(headDim) * f)
		r.Dims -= r.Dims % 2
	}
	if r.Dims%2 != 0 {
		return r, fmt.Errorf("rotary dimension %d is odd", r.Dims)
	}
	typ := p.RopeType
	if typ == "" {
		typ = p.Type
	}
	orig := deref(p.OriginalMaxPos, c.MaxPositionEmbeddings)
	switch typ {
	case "", "default":
	case "linear":
		r.Scaling = model.RopeScaling{Type: "linear", Factor: deref(p.Factor, 1)}
	case "llama3":
		r.Scaling = model.RopeScaling{
			Type:            "llama3",
			Factor:          deref(p.Factor, 8),
			LowFreqFactor:   deref(p.LowFreqFactor, 1),
			HighFreqFactor:  deref(p.HighFreqFactor, 4),
			OriginalContext: deref(p.OriginalMaxPos, 8192),
		}
	case "yarn":
		factor := deref(p.Factor, 1)
		attn := deref(p.AttentionFactor, 0)
		if attn == 0 {
			// transformers' get_mscale, with the DeepSeek mscale variant.
			mscale := func(scale, m float64) float64 {
				if scale <= 1 {
					return 1
				}
				return 0.1*m*math.Log(scale) + 1
			}
			if p.Mscale != nil && p.MscaleAllDim != nil {
				attn = mscale(factor, *p.Mscale) / mscale(factor, *p.MscaleAllDim)
			} else {
				attn = mscale(factor, 1)
			}
		}
		r.Scaling = model.RopeScaling{
			Type:            "yarn",
			Factor:          factor,
			OriginalContext: orig,
			BetaFast:        deref(p.BetaFast, 32),
			BetaSlow:        deref(p.BetaSlow, 1),
			AttnFactor:      attn,
			NoTruncate:      !deref(p.Truncate, true),
		}
	default:
		return r, fmt.Errorf("rope type %q is not supported", typ)
	}
	if r.Scaling.Type == "linear" || r.Scaling.Type == "llama3" || r.Scaling.Type == "yarn" {
		if r.Scaling.Factor <= 0 {
			return r, fmt.Errorf("rope %s factor %v must be positive", typ, r.Scaling.Factor)
		}
	}
	return r, nil
}

package model

import "fmt"

// Canonical tensor names. They follow GGUF's naming (so a GGUF file needs no
// renaming) with shapes in PyTorch order: a projection is [out, in].
//
//	token_embd.weight            [vocab, hidden]
//	output_norm.weight           [hidden]
//	output.weight                [vocab, hidden]   absent when Arch.TiedEmbeddings
//
// Per layer N, prefix "blk.N.":
//
//	attn_norm.weight             [hidden]          pre-mixer norm
//	post_attention_norm.weight   [hidden]          post-mixer norm (gemma2/3, olmo2)
//	ffn_norm.weight              [hidden]          pre-FFN norm
//	post_ffw_norm.weight         [hidden]          post-FFN norm (gemma2/3, olmo2)
//
//	attn_q.weight  [heads*head_dim (x2 with OutputGate), hidden]  (+ .bias)
//	attn_k.weight  [kv_heads*head_dim, hidden]                     (+ .bias)
//	attn_v.weight  [kv_heads*head_dim, hidden]                     (+ .bias)
//	attn_output.weight [hidden, heads*head_dim]                    (+ .bias)
//	attn_q_norm.weight / attn_k_norm.weight  [head_dim] (per head) or [heads*head_dim] (full)
//	attn_sinks.weight  [heads]                                     (Attention.Sinks)
//
//	ffn_gate.weight [ffn, hidden]  ffn_up.weight [ffn, hidden]  ffn_down.weight [hidden, ffn]
//
// MoE (experts stacked in one bank per layer):
//
//	ffn_gate_inp.weight   [experts, hidden]               router
//	ffn_gate_inp.bias     [experts]                       router bias (MoE.RouterBias)
//	exp_probs_b.bias      [experts]                       selection bias (optional)
//	ffn_gate_exps.weight  [experts, expert_hidden, hidden]
//	ffn_up_exps.weight    [experts, expert_hidden, hidden]
//	ffn_down_exps.weight  [experts, hidden, expert_hidden]
//	ffn_{gate,up,down}_exps.bias [experts, out]           (MoE.ExpertBias)
//	ffn_gate_shexp.weight / ffn_up_shexp.weight [shared_hidden, hidden]
//	ffn_down_shexp.weight [hidden, shared_hidden]
//	ffn_gate_inp_shexp.weight [1, hidden]                 shared-expert sigmoid gate
//
// Hybrid mixers name their own tensors under the same prefix
// (shortconv.*, ssm_*); see the backends that implement them.
const (
	TokenEmbd  = "token_embd.weight"
	OutputNorm = "output_norm.weight"
	Output     = "output.weight"
)

// Per-layer tensor suffixes.
const (
	AttnNorm      = "attn_norm.weight"
	PostAttnNorm  = "post_attention_norm.weight"
	FFNNorm       = "ffn_norm.weight"
	PostFFNNorm   = "post_ffw_norm.weight"
	AttnQ         = "attn_q.weight"
	AttnK         = "attn_k.weight"
	AttnV         = "attn_v.weight"
	AttnOut       = "attn_output.weight"
	AttnQBias     = "attn_q.bias"
	AttnKBias     = "attn_k.bias"
	AttnVBias     = "attn_v.bias"
	AttnOutBias   = "attn_output.bias"
	AttnQNorm     = "attn_q_norm.weight"
	AttnKNorm     = "attn_k_norm.weight"
	AttnSinks     = "attn_sinks.weight"
	FFNGate       = "ffn_gate.weight"
	FFNUp         = "ffn_up.weight"
	FFNDown       = "ffn_down.weight"
	FFNRouter     = "ffn_gate_inp.weight"
	FFNRouterBias = "exp_probs_b.bias"
	FFNGateExps   = "ffn_gate_exps.weight"
	FFNUpExps     = "ffn_up_exps.weight"
	FFNDownExps   = "ffn_down_exps.weight"
	FFNRouterB    = "ffn_gate_inp.bias"
	FFNGateExpsB  = "ffn_gate_exps.bias"
	FFNUpExpsB    = "ffn_up_exps.bias"
	FFNDownExpsB  = "ffn_down_exps.bias"
	FFNGateShexp  = "ffn_gate_shexp.weight"
	FFNUpShexp    = "ffn_up_shexp.weight"
	FFNDownShexp  = "ffn_down_shexp.weight"
	FFNShexpGate  = "ffn_gate_inp_shexp.weight"
)

// LayerTensor is the canonical name of a per-layer tensor.
func LayerTensor(layer int, suffix string) string {
	return fmt.Sprintf("blk.%d.%s", layer, suffix)
}

// Canonical names of the hybrid mixers' tensors (per layer, after "blk.N.").
// They follow llama.cpp's GGUF names where one exists.
const (
	// LFM2 short convolution.
	ShortConvWeight = "shortconv.conv.weight"     // [hidden, kernel] depthwise taps
	ShortConvBias   = "shortconv.conv.bias"       // [hidden] (conv_bias only)
	ShortConvIn     = "shortconv.in_proj.weight"  // [3*hidden, hidden]: B, C, x
	ShortConvInBias = "shortconv.in_proj.bias"    // (conv_bias only)
	ShortConvOut    = "shortconv.out_proj.weight" // [hidden, hidden]
	ShortConvOutB   = "shortconv.out_proj.bias"   // (conv_bias only)

	// qwen3_next gated DeltaNet, kept in transformers' layout.
	DeltaQKVZ   = "ssm_in.weight"     // in_proj_qkvz [2*kh*kd + 2*vh*vd, hidden], grouped per key head
	DeltaBA     = "ssm_ba.weight"     // in_proj_ba [2*vh, hidden], grouped per key head
	DeltaConv   = "ssm_conv1d.weight" // [2*kh*kd + vh*vd, kernel]
	DeltaDTBias = "ssm_dt.bias"       // [vh]
	DeltaALog   = "ssm_a_log"         // [vh] A_log (A = -exp(A_log))
	DeltaNorm   = "ssm_norm.weight"   // [vd] gated RMSNorm weight (plain w)
	DeltaOut    = "ssm_out.weight"    // [hidden, vh*vd]
)

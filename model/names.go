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
//
//	ffn_gate.weight [ffn, hidden]  ffn_up.weight [ffn, hidden]  ffn_down.weight [hidden, ffn]
//
// MoE (experts stacked in one bank per layer):
//
//	ffn_gate_inp.weight   [experts, hidden]               router
//	exp_probs_b.bias      [experts]                       selection bias (optional)
//	ffn_gate_exps.weight  [experts, expert_hidden, hidden]
//	ffn_up_exps.weight    [experts, expert_hidden, hidden]
//	ffn_down_exps.weight  [experts, hidden, expert_hidden]
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
	FFNGate       = "ffn_gate.weight"
	FFNUp         = "ffn_up.weight"
	FFNDown       = "ffn_down.weight"
	FFNRouter     = "ffn_gate_inp.weight"
	FFNRouterBias = "exp_probs_b.bias"
	FFNGateExps   = "ffn_gate_exps.weight"
	FFNUpExps     = "ffn_up_exps.weight"
	FFNDownExps   = "ffn_down_exps.weight"
	FFNGateShexp  = "ffn_gate_shexp.weight"
	FFNUpShexp    = "ffn_up_shexp.weight"
	FFNDownShexp  = "ffn_down_shexp.weight"
	FFNShexpGate  = "ffn_gate_inp_shexp.weight"
)

// LayerTensor is the canonical name of a per-layer tensor.
func LayerTensor(layer int, suffix string) string {
	return fmt.Sprintf("blk.%d.%s", layer, suffix)
}

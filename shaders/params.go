package shaders

// The kernels' params structs: each mirrors its kernel's WGSL `struct P`
// field for field (TestKernelTable checks it). Blank fields are WGSL
// padding (a variant may use the word: MatmulParams.Eps is the fused-norm
// matmul's; the plain one pads there).

// EmbedParams is embed.wgsl's P.
type EmbedParams struct {
	Hidden uint32
	SOff   uint32 // the weight's scale plane, in u32 words
	Scale  float32
	TokOff uint32 // index of the first token in `tokens`
}

// MatmulParams is matmul_io.wgsl's P (matmul, matvec, gemm, and with Eps
// the fused-norm matmul): out[t*OutStride+OutOff+o] (= or +=, Mode) Alpha·W·x.
type MatmulParams struct {
	Rows, Cols uint32
	SOff       uint32
	Mode       uint32 // 0 write, 1 add, 2 interleaved gate/up through the activation
	Alpha      float32
	Softcap    float32
	Sel        uint32 // 2: rows of the head (last token or all)
	HasBias    Flag
	OutStride  uint32
	OutOff     uint32
	Act        uint32 // bit 0 GELU-tanh; bit 1 the fused norm's (1+w)
	Eps        float32
}

// NormParams is rmsnorm.wgsl's P.
type NormParams struct {
	N        uint32
	Eps      float32
	PlusOne  Flag
	Mode     uint32 // 0 write, 1 add
	Alpha    float32
	Sel      uint32
	InStride uint32
	InOff    uint32
	OutStride,
	OutOff uint32
	_ [2]uint32
}

// PrepParams is qkv_prep.wgsl's P.
type PrepParams struct {
	Heads, KVHeads, HD uint32
	Rot                uint32
	Style              uint32 // 0 neox, 1 interleaved
	QKNorm             Flag   // per-head RMSNorm of q and k
	Eps                float32
	PlusOne            Flag
	KNOff              uint32 // k-norm weights start here in qkn
	KVLen              uint32 // ring rows; 0 = one row per position
	_                  [2]uint32
}

// AttnParams is attention_io.wgsl's P (attention, its split-K variant,
// attn_prefill).
type AttnParams struct {
	Heads, KVHeads, HD uint32
	Window             uint32 // 0 = unlimited
	Scale              float32
	Softcap            float32
	QStride            uint32
	SplitLen           uint32
	MaxSplits          uint32
	KVLen              uint32
	HasSink            Flag
	SinkOff            uint32
}

// CombineParams is attn_combine.wgsl's P.
type CombineParams struct {
	Heads, HD           uint32
	Window              uint32
	SplitLen, MaxSplits uint32
	_                   [3]uint32
}

// ActMulParams is act_mul.wgsl's P.
type ActMulParams struct {
	F           uint32
	Act         uint32
	Interleaved Flag
	_           uint32
}

// ArgmaxPartParams is argmax_part.wgsl's P.
type ArgmaxPartParams struct {
	N, Per uint32
	_      [2]uint32
}

// ArgmaxParams is argmax.wgsl's P.
type ArgmaxParams struct {
	N uint32
	_ [3]uint32
}

// The hybrid and MoE kernels' params structs (ShortConvParams to
// MoECombineParams) are 48 bytes, the matmul's and the largest: wgpu-native
// checks a dispatch's uniform binding against the size an earlier pipeline
// of the same bind group layout declared (a 16-byte block dispatched right
// after attn_combine's 32-byte one failed validation), so these kernels all
// declare and bind the largest size.

// ShortConvParams is shortconv.wgsl's P.
type ShortConvParams struct {
	H, K    uint32
	HasBias Flag
	Slots   uint32
	_       [8]uint32
}

// DeltaConvParams is delta_conv.wgsl's P.
type DeltaConvParams struct {
	CDim, K, KH, DK, DV, R, RW, Slots uint32
	_                                 [4]uint32
}

// DeltaRuleParams is delta_rule.wgsl's P.
type DeltaRuleParams struct {
	KH, VH, DK, DV, CDim, RW uint32
	Eps                      float32
	Slots                    uint32
	_                        [4]uint32
}

// AttnGateParams is attn_gate.wgsl's P.
type AttnGateParams struct {
	W uint32
	_ [11]uint32
}

// RouteParams is moe_route.wgsl's P.
type RouteParams struct {
	E, K     uint32
	Scoring  uint32
	NormTopK Flag
	HasBias  Flag
	Scale    float32
	Stride   uint32
	_        [5]uint32
}

// ExpertParams is moe_matmul.wgsl's and moe_gemm.wgsl's P (E and Stride
// are the GEMM's).
type ExpertParams struct {
	Rows, Cols uint32
	SOff       uint32
	GU         Flag
	K          uint32
	Act        uint32
	E, Stride  uint32
	HasBias    Flag
	Limit      float32
	Alpha      float32
	_          uint32
}

// MoECombineParams is moe_combine.wgsl's P.
type MoECombineParams struct {
	H, K       uint32
	Mode       uint32
	Alpha      float32
	HasShared  Flag
	SharedGate Flag
	_          [6]uint32
}

// Conv2DParams is conv2d.wgsl's P.
type Conv2DParams struct {
	H, W, CIn, COut, K uint32
	Res                Flag
	_                  [2]uint32
}

// GroupNormStatsParams is group_norm_stats.wgsl's P.
type GroupNormStatsParams struct {
	Pixels, C, Groups uint32
	Eps               float32
}

// GroupNormApplyParams is group_norm_apply.wgsl's P.
type GroupNormApplyParams struct {
	Pixels, C, Groups uint32
	SiLU              Flag
}

// Upsample2xParams is upsample2x.wgsl's P.
type Upsample2xParams struct {
	H, W, C uint32
	_       uint32
}

// AttentionFullParams is attention_full.wgsl's P.
type AttentionFullParams struct {
	N, D   uint32
	Scale  float32
	Stride uint32
	Row0   uint32
	_      [3]uint32
}

// LinearParams is linear.wgsl's and linear_codec.wgsl's P (SOff is the
// codec variant's).
type LinearParams struct {
	Rows, NIn, NOut, Row0 uint32
	HasBias               Flag
	SOff                  uint32
	_                     [2]uint32
}

// RowsNormParams is rows_norm.wgsl's P.
type RowsNormParams struct {
	Width, Row0, Rows uint32
	Mode              uint32
	Eps               float32
	HasW, HasScale    Flag
	ScaleOff          uint32
}

// QKRopeParams is qk_rope.wgsl's P.
type QKRopeParams struct {
	Heads, HD, Row0, Rows uint32
	Eps                   float32
	HasNorm               Flag
	Width                 uint32
	_                     uint32
}

// GatedAddParams is gated_add.wgsl's P.
type GatedAddParams struct {
	Width, Row0, Rows uint32
	HasGate           Flag
	GateOff           uint32
	_                 [3]uint32
}

// SiLUMulParams is silu_mul.wgsl's P.
type SiLUMulParams struct {
	N, Off uint32
	_      [2]uint32
}

func (EmbedParams) Kernel() string          { return KEmbed }
func (MatmulParams) Kernel() string         { return KMatmul }
func (NormParams) Kernel() string           { return KRMSNorm }
func (PrepParams) Kernel() string           { return QKVPrep }
func (AttnParams) Kernel() string           { return Attention }
func (CombineParams) Kernel() string        { return Combine }
func (ActMulParams) Kernel() string         { return ActMul }
func (ArgmaxPartParams) Kernel() string     { return ArgmaxPart }
func (ArgmaxParams) Kernel() string         { return Argmax }
func (ShortConvParams) Kernel() string      { return ShortConv }
func (DeltaConvParams) Kernel() string      { return DeltaConv }
func (DeltaRuleParams) Kernel() string      { return DeltaRule }
func (AttnGateParams) Kernel() string       { return AttnGate }
func (RouteParams) Kernel() string          { return MoERoute }
func (ExpertParams) Kernel() string         { return KExperts }
func (MoECombineParams) Kernel() string     { return MoECombine }
func (Conv2DParams) Kernel() string         { return Conv2D }
func (GroupNormStatsParams) Kernel() string { return GroupNormStats }
func (GroupNormApplyParams) Kernel() string { return GroupNormApply }
func (Upsample2xParams) Kernel() string     { return Upsample2x }
func (AttentionFullParams) Kernel() string  { return AttentionFull }
func (LinearParams) Kernel() string         { return Linear }
func (RowsNormParams) Kernel() string       { return RowsNorm }
func (QKRopeParams) Kernel() string         { return QKRope }
func (GatedAddParams) Kernel() string       { return GatedAdd }
func (SiLUMulParams) Kernel() string        { return SiLUMul }

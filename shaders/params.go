package shaders

// The kernels' params structs. Each is its kernels' WGSL `struct P` too:
// a WGSL source names it with a line `//!P <struct name>` where read
// expands the struct generated from the Go one (wgslStruct: u32 for uint32
// and Flag, f32 for float32, names in snake case or from the wgsl tag,
// blank fields as padding). A field only some variants read (Eps of the
// fused-norm matmul, E and Stride of the expert GEMM, SOff of the coded
// linear) is declared in all.

// EmbedParams is embed.wgsl's P.
type EmbedParams struct {
	Hidden uint32
	SOff   uint32 `wgsl:"soff"` // the weight's scale plane, in u32 words
	Scale  float32
	TokOff uint32 // index of the first token in `tokens`
}

// MatmulParams is matmul_io.wgsl's P (matmul, matvec, gemm, and with Eps
// the fused-norm matmul): out[t*OutStride+OutOff+o] (= or +=, Mode) Alpha·W·x.
type MatmulParams struct {
	Rows, Cols uint32
	SOff       uint32 `wgsl:"soff"`
	Mode       uint32 // 0 write, 1 add, 2 interleaved gate/up through the activation
	Alpha      float32
	Softcap    float32
	Sel        uint32 // 2: rows of the head (last token or all)
	HasBias    Flag
	OutStride  uint32
	OutOff     uint32
	Act        uint32  // bit 0 GELU-tanh; bit 1 the fused norm's (1+w)
	Eps        float32 // the fused norm's epsilon
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
	KVLen              uint32 // rows of kc/vc: position p goes to row p % KVLen (a sliding-window ring); 0 = row p
	_                  [2]uint32
}

// AttnParams is attention_io.wgsl's P (attention, its split-K variant,
// attn_prefill).
type AttnParams struct {
	Heads, KVHeads, HD uint32
	Window             uint32 // 0 = unlimited, else the last Window positions
	Scale              float32
	Softcap            float32
	QStride            uint32
	SplitLen           uint32
	MaxSplits          uint32 // partial slots per (token, head)
	KVLen              uint32 // rows of kc/vc: position j lives in row j % KVLen (a sliding-window ring); 0 = row j
	HasSink            Flag   // head h's sink logit joins each softmax's denominator (gpt-oss)
	SinkOff            uint32 // the sinks' offset in kc's elements, after the cache's last row (sink_load)
}

// AttnPrepParams is attention_prep_io.wgsl's P: AttnParams and the
// PrepParams fields qkv_prep's work needs (head_prep.wgsl).
type AttnPrepParams struct {
	Heads, KVHeads, HD uint32
	Window             uint32
	Scale              float32
	Softcap            float32
	QStride            uint32
	SplitLen           uint32
	MaxSplits          uint32
	KVLen              uint32
	HasSink            Flag
	SinkOff            uint32
	Rot                uint32
	Style              uint32 // 0 neox, 1 interleaved
	QKNorm             Flag   // per-head RMSNorm of q and k
	Eps                float32
	PlusOne            Flag
	KNOff              uint32 // k-norm weights start here in qkn
	_                  [2]uint32
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
	CDim                        uint32 `wgsl:"cdim"`
	K, KH, DK, DV, R, RW, Slots uint32
	_                           [4]uint32
}

// DeltaRuleParams is delta_rule.wgsl's P.
type DeltaRuleParams struct {
	KH, VH, DK, DV uint32
	CDim           uint32 `wgsl:"cdim"`
	RW             uint32
	Eps            float32
	Slots          uint32
	_              [4]uint32
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
	NormTopK Flag `wgsl:"norm_topk"`
	HasBias  Flag
	Scale    float32
	Stride   uint32
	_        [5]uint32
}

// ExpertParams is moe_matmul.wgsl's and moe_gemm.wgsl's P (E and Stride
// are the GEMM's).
type ExpertParams struct {
	Rows, Cols uint32
	SOff       uint32 `wgsl:"soff"`
	GU         Flag
	K          uint32
	Act        uint32
	E, Stride  uint32
	HasBias    Flag    // bias: per expert [gate rows; up rows] (GU) or rows
	Limit      float32 // act 2
	Alpha      float32 // act 2
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

// Conv2DParams is conv2d.wgsl's P: rows [Y0, Y0+Rows) of an H×W output
// whose bindings hold a band of rows (y and res from row YBase, x from
// input row XBase).
type Conv2DParams struct {
	H, W  uint32
	CIn   uint32 `wgsl:"cin"`
	COut  uint32 `wgsl:"cout"`
	K     uint32
	Res   Flag
	Up    Flag // x is H/2×W/2, upsampled 2× (nearest) on the fly
	Y0    uint32
	Rows  uint32
	YBase uint32 `wgsl:"ybase"`
	XBase uint32 `wgsl:"xbase"`
	_     uint32
}

// GroupNormStatsParams is group_norm_stats.wgsl's P: pass Pass over the
// band of Pixels pixels from pixel Pix0 of an image of Total pixels.
type GroupNormStatsParams struct {
	Pixels, C, Groups uint32
	Eps               float32
	Pix0              uint32
	Total             uint32
	Pass              uint32 `wgsl:"phase"` // 0 sums (then the mean), 1 squared deviations (then 1/σ)
	_                 uint32
}

// CopyF32Params is copy_f32.wgsl's P: y[DOff+i] = x[SOff+i] for i < N.
type CopyF32Params struct {
	N    uint32
	SOff uint32 `wgsl:"soff"`
	DOff uint32 `wgsl:"doff"`
	_    uint32
}

// GroupNormApplyParams is group_norm_apply.wgsl's P.
type GroupNormApplyParams struct {
	Pixels, C, Groups uint32
	SiLU              Flag `wgsl:"silu"`
}

// AttentionFullParams is attention_full.wgsl's P.
type AttentionFullParams struct {
	N, D   uint32
	Scale  float32
	Stride uint32
	Row0   uint32
	_      [3]uint32
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

func (EmbedParams) Kernel() string          { return KEmbed }
func (MatmulParams) Kernel() string         { return KMatmul }
func (NormParams) Kernel() string           { return KRMSNorm }
func (PrepParams) Kernel() string           { return QKVPrep }
func (AttnParams) Kernel() string           { return Attention }
func (AttnPrepParams) Kernel() string       { return AttentionPrep }
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
func (CopyF32Params) Kernel() string        { return CopyF32 }
func (AttentionFullParams) Kernel() string  { return AttentionFull }
func (RowsNormParams) Kernel() string       { return RowsNorm }
func (QKRopeParams) Kernel() string         { return QKRope }

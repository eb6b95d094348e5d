// Package kernels holds cortiq's CUDA C kernels (the .cu sources beside this
// file), their PTX image compiled ahead by `make cuda-kernels`, and the Go
// side of their ABI: kernel names, argument structs in parameter order, launch
// geometry, and the device layout of every weight codec.
//
// The contract (also in the repository notes as cuda-abi.md):
//   - every kernel is extern "C", named ck_*, in the one module PTX;
//   - activations are f32, row-major [tokens][dim], accumulation is f32;
//   - a launcher fills an XxxArgs, passes Params() as cuLaunchKernel's
//     kernelParams and Launch() as its grid, block and dynamic shared memory;
//   - weights sit on the device as Repack lays them out, each row at
//     row*DeviceRowBytes(codec, cols);
//   - the device step state is int32[4]: [0] position of the next token,
//     [1] next input token id, [2] greedy steps done, [3] reserved (StateSize).
//
// This package has no cgo and no CUDA dependency: it builds everywhere.
package kernels

import (
	"fmt"
	"unsafe"
)

// Ptr is a device address (CUdeviceptr).
type Ptr uint64

// Geometry is one launch's shape.
type Geometry struct {
	Grid   [3]uint32
	Block  [3]uint32
	Shared uint32 // dynamic shared memory bytes
}

// NeedsOptIn reports whether the function's dynamic shared memory limit must
// be raised (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES) before launch.
func (g Geometry) NeedsOptIn() bool { return g.Shared > 48<<10 }

func geo(gx, gy, gz, bx uint32, shared uint32) Geometry {
	return Geometry{Grid: [3]uint32{max(gx, 1), max(gy, 1), max(gz, 1)}, Block: [3]uint32{bx, 1, 1}, Shared: shared}
}

func cdiv(a, b int) uint32 { return uint32((a + b - 1) / b) }

// State slots of the device step state (int32[StateSize]).
const (
	StatePos   = 0 // position of the next token to run
	StateToken = 1 // next input token id (embed reads it in decode)
	StateSteps = 2 // greedy steps done (index into the history ring)
	StateSize  = 4
)

// Activation selects the gate activation of ck_act_mul and the fused GLU
// matvec (same formulas as cpu/kernel).
const (
	ActSiLU     int32 = 0
	ActGELUTanh int32 = 1
)

// Codecs the kernels run, by tensor.Codec name.
var Codecs = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", "q6_K"}

type codecLayout struct {
	block  int // elements per block
	qbytes int // quant bytes per block on the device (planar codecs: without d)
	gguf   int // GGUF block bytes
	planar bool
}

var layouts = map[string]codecLayout{
	"f32":  {1, 4, 4, false},
	"f16":  {1, 2, 2, false},
	"bf16": {1, 2, 2, false},
	"q8_0": {32, 32, 34, true},
	"q4_0": {32, 16, 18, true},
	"q4_K": {256, 144, 144, false},
	"q6_K": {256, 208, 210, true},
}

// Supported reports whether the kernels run codec (a tensor.Codec name).
func Supported(codec string) bool { _, ok := layouts[codec]; return ok }

// BlockLen is the codec's block length in elements; a row's cols must be a
// multiple of it (and of 32 for the matvec/GEMM kernels).
func BlockLen(codec string) int { return layouts[codec].block }

// DeviceRowBytes is the stride of one row of cols elements on the device: the
// GGUF row bytes rounded up to 16.
func DeviceRowBytes(codec string, cols int) int {
	l := layouts[codec]
	n := cols / l.block * l.gguf
	return (n + 15) &^ 15
}

// Repack lays out rows×cols weights, given in GGUF block layout (src, rows
// of cols/block GGUF blocks, contiguous), as the kernels read them: each row
// padded to DeviceRowBytes; q4_0, q8_0 and q6_K planar per row (every
// block's quant bytes, then every block's f16 d). dst must hold
// rows*DeviceRowBytes bytes.
func Repack(codec string, rows, cols int, src, dst []byte) error {
	l, ok := layouts[codec]
	if !ok {
		return fmt.Errorf("cuda kernels: codec %q not supported", codec)
	}
	if cols%l.block != 0 || cols%32 != 0 {
		return fmt.Errorf("cuda kernels: %s row of %d columns is not a multiple of the block (%d) and of 32", codec, cols, l.block)
	}
	nb := cols / l.block
	in, out := nb*l.gguf, DeviceRowBytes(codec, cols)
	if len(src) < rows*in || len(dst) < rows*out {
		return fmt.Errorf("cuda kernels: %s %dx%d: src %d bytes (want %d), dst %d (want %d)", codec, rows, cols, len(src), rows*in, len(dst), rows*out)
	}
	for r := range rows {
		s, d := src[r*in:(r+1)*in], dst[r*out:(r+1)*out]
		if !l.planar {
			copy(d, s)
			clear(d[in:])
			continue
		}
		// GGUF q4_0/q8_0 put d first; q6_K puts it last.
		dOff, qOff := 0, 2
		if codec == "q6_K" {
			dOff, qOff = l.qbytes, 0
		}
		for b := range nb {
			blk := s[b*l.gguf : (b+1)*l.gguf]
			copy(d[b*l.qbytes:(b+1)*l.qbytes], blk[qOff:qOff+l.qbytes])
			copy(d[nb*l.qbytes+2*b:nb*l.qbytes+2*b+2], blk[dOff:dOff+2])
		}
		clear(d[in:])
	}
	return nil
}

// Kernel names. Per-codec kernels are Name + codec (EmbedPrefix+"q4_0").
const (
	EmbedPrefix       = "ck_embed_"
	MatvecPrefix      = "ck_mv_"
	MatvecBatchPrefix = "ck_mvb_"
	MatvecInt8Prefix  = "ck_mvq_" // q8_0, q4_0, q4_K, q6_K only (Int8Codecs)
	GemmPrefix        = "ck_gemm_"
	GemmQPrefix       = "ck_mmq_"           // + an Int8Codecs codec: the int8 mma GEMM, 128-token tiles
	GemmQSmallPrefix  = "ck_mmqs_"          // the same with 64-token tiles (GemmQArgs.Small)
	KVWritePrefix     = "ck_kv_write_"      // + "f32" | "f16"
	RopeKVPrefix      = "ck_rope_kv_"       // + "f32" | "f16" (the cache type)
	FAPrefillPrefix   = "ck_fa_prefill_"    // + "f32" | "f16"; tensor cores, head dim 64 or 128
	FlashPrefix       = "ck_flash_prefill_" // + "f32" | "f16" + "_64" | "_128" (FlashName); mma.sync in registers
	AttnDecodePrefix  = "ck_attn_decode_"   // + "f32" | "f16" (the cache type)
	AttnPrefillPrefix = "ck_attn_prefill_"  // + "f32" | "f16"
	AttnDecode1Prefix = "ck_attn_dec1_"     // + "f32" | "f16", "_" + head dim, "_4" | "_8": Decode1Name

	RMSNorm     = "ck_rmsnorm"
	AddRMSNorm  = "ck_add_rmsnorm"
	Add         = "ck_add"
	Rope        = "ck_rope"
	AttnCombine = "ck_attn_combine"
	ActMul      = "ck_act_mul"
	ArgmaxRows  = "ck_argmax_rows"
	ArgmaxStep  = "ck_argmax_step"
	QuantQ8     = "ck_quant_q8"
	Advance     = "ck_advance"
)

// MaxBatch is the most columns ck_mvb_* takes (k+1 of speculative verify).
const MaxBatch = 8

// params returns pointers to every field of the struct p points to, in order
// (each field is 8 or 4 bytes, laid out without gaps that matter to the
// caller: cuLaunchKernel reads each pointer separately).
func params(p ...unsafe.Pointer) []unsafe.Pointer { return p }

// EmbedArgs: out[t] = dequant(table row ids[t]) * Scale.
type EmbedArgs struct {
	Out, Table, IDs Ptr
	T, Dim          int32
	RowBytes        int32
	Scale           float32
}

func (a *EmbedArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Out), unsafe.Pointer(&a.Table), unsafe.Pointer(&a.IDs), unsafe.Pointer(&a.T),
		unsafe.Pointer(&a.Dim), unsafe.Pointer(&a.RowBytes), unsafe.Pointer(&a.Scale))
}
func (a *EmbedArgs) Launch() Geometry { return geo(uint32(a.T), 1, 1, 128, 0) }

// RMSNormArgs: out = x/rms(x) * W (or (1+W) with PlusOne=1; no weight when W=0).
type RMSNormArgs struct {
	Out, X, W Ptr
	Rows, Dim int32
	Eps       float32
	PlusOne   int32
}

func (a *RMSNormArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Out), unsafe.Pointer(&a.X), unsafe.Pointer(&a.W), unsafe.Pointer(&a.Rows),
		unsafe.Pointer(&a.Dim), unsafe.Pointer(&a.Eps), unsafe.Pointer(&a.PlusOne))
}
func (a *RMSNormArgs) Launch() Geometry { return geo(uint32(a.Rows), 1, 1, 256, 0) }

// AddRMSNormArgs: Resid += DeltaScale*Delta; Out = rmsnorm(Resid)*W.
type AddRMSNormArgs struct {
	Resid, Delta, Out, W Ptr
	Rows, Dim            int32
	Eps                  float32
	PlusOne              int32
	DeltaScale           float32
}

func (a *AddRMSNormArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Resid), unsafe.Pointer(&a.Delta), unsafe.Pointer(&a.Out), unsafe.Pointer(&a.W),
		unsafe.Pointer(&a.Rows), unsafe.Pointer(&a.Dim), unsafe.Pointer(&a.Eps), unsafe.Pointer(&a.PlusOne),
		unsafe.Pointer(&a.DeltaScale))
}
func (a *AddRMSNormArgs) Launch() Geometry { return geo(uint32(a.Rows), 1, 1, 256, 0) }

// AddArgs: Out = A + BScale*B over N floats.
type AddArgs struct {
	Out, A, B Ptr
	N         int32
	BScale    float32
}

func (a *AddArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Out), unsafe.Pointer(&a.A), unsafe.Pointer(&a.B), unsafe.Pointer(&a.N), unsafe.Pointer(&a.BScale))
}
func (a *AddArgs) Launch() Geometry { return geo(cdiv(int(a.N), 1024), 1, 1, 256, 0) }

// RopeArgs rotates X in place ([T][Heads*HeadDim]) at positions *Pos0+t.
type RopeArgs struct {
	X, Pos0, InvFreq           Ptr
	T, Heads, HeadDim, RotDims int32
	NeoX                       int32
	MScale                     float32
}

func (a *RopeArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.X), unsafe.Pointer(&a.Pos0), unsafe.Pointer(&a.InvFreq), unsafe.Pointer(&a.T),
		unsafe.Pointer(&a.Heads), unsafe.Pointer(&a.HeadDim), unsafe.Pointer(&a.RotDims), unsafe.Pointer(&a.NeoX),
		unsafe.Pointer(&a.MScale))
}
func (a *RopeArgs) Launch() Geometry { return geo(uint32(a.T), uint32(a.Heads), 1, 64, 0) }

// KVWriteArgs stores K and V of T tokens at cache rows (*Pos0+t)%Ring.
type KVWriteArgs struct {
	KCache, VCache, K, V, Pos0 Ptr
	T, KVDim, Ring             int32
}

func (a *KVWriteArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.KCache), unsafe.Pointer(&a.VCache), unsafe.Pointer(&a.K), unsafe.Pointer(&a.V),
		unsafe.Pointer(&a.Pos0), unsafe.Pointer(&a.T), unsafe.Pointer(&a.KVDim), unsafe.Pointer(&a.Ring))
}
func (a *KVWriteArgs) Launch() Geometry { return geo(uint32(a.T), 1, 1, 256, 0) }

// AttnDecodeArgs is flash-decoding's first pass; AttnCombineArgs the second.
// PartO holds T*Heads*NSplit*HeadDim floats, PartML T*Heads*NSplit*2.
type AttnDecodeArgs struct {
	PartO, PartML, Q, KCache, VCache, Pos0 Ptr
	T, Heads, KVHeads, HeadDim, Ring       int32
	Window                                 int32 // 0 = no window
	Scale, Softcap                         float32
	NSplit                                 int32
	QStride                                int32 // floats between tokens' q rows; 0 = Heads*HeadDim
}

func (a *AttnDecodeArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.PartO), unsafe.Pointer(&a.PartML), unsafe.Pointer(&a.Q), unsafe.Pointer(&a.KCache),
		unsafe.Pointer(&a.VCache), unsafe.Pointer(&a.Pos0), unsafe.Pointer(&a.T), unsafe.Pointer(&a.Heads),
		unsafe.Pointer(&a.KVHeads), unsafe.Pointer(&a.HeadDim), unsafe.Pointer(&a.Ring), unsafe.Pointer(&a.Window),
		unsafe.Pointer(&a.Scale), unsafe.Pointer(&a.Softcap), unsafe.Pointer(&a.NSplit), unsafe.Pointer(&a.QStride))
}

// attnTile is the keys per shared-memory tile of ck_attn_decode_*.
func attnTile(hd int) int {
	if hd > 128 {
		return 16
	}
	return 32
}

// Launch: one block per (kv head, split, token). Shared: K tile (hd+1
// padded) and V tile of attnTile keys, the group's q, and the scores.
func (a *AttnDecodeArgs) Launch() Geometry {
	hd, g, kt := int(a.HeadDim), int(a.Heads/a.KVHeads), attnTile(int(a.HeadDim))
	sh := 4 * (kt*(hd+1) + kt*hd + g*hd + g*kt + 3*g)
	return geo(uint32(a.KVHeads), uint32(a.NSplit), uint32(a.T), 128, uint32(sh))
}

// DecodeSplits is a good NSplit for a device with sms multiprocessors: about
// two blocks per multiprocessor, at most 64. The split of the key range is
// made on the device from the current position, so one value serves every
// depth (CUDA graphs).
func DecodeSplits(sms, kvHeads int) int32 {
	return int32(min(64, max(1, (2*sms+kvHeads-1)/kvHeads)))
}

// AttnDecode1Args is decode attention in one launch: flash-decoding's
// splits, each merged inside its block, and the combine done by the last
// block of each (token, kv head) to finish, which finds itself through
// Done, a counter per (token, kv head) that is zero between launches
// (T*KVHeads uint32, zeroed once when allocated; the kernel puts it back).
// PartO and PartML are scratch as for AttnDecodeArgs; Out gets T rows of
// Heads*HeadDim as ck_attn_combine writes them. Sinks (one logit per head)
// may be 0.
//
// With KNew (T = 1 only) the kernel is also ck_rope_kv: Q, KNew and VNew are
// the token's q, k, v rows as the qkv product left them, and the RoPE
// fields are RopeKVArgs'.
type AttnDecode1Args struct {
	Out, PartO, PartML, Done, Q, KCache, VCache, Pos0, Sinks Ptr
	T, Heads, KVHeads, Ring                                  int32
	Window                                                   int32 // 0 = no window
	Scale, Softcap                                           float32
	NSplit                                                   int32
	QStride                                                  int32 // floats between tokens' q rows; 0 = Heads*HeadDim
	KNew, VNew, InvFreq                                      Ptr   // KNew 0 = the cache holds the token's K/V already
	RotDims, NeoX                                            int32
	MScale                                                   float32
}

func (a *AttnDecode1Args) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Out), unsafe.Pointer(&a.PartO), unsafe.Pointer(&a.PartML), unsafe.Pointer(&a.Done),
		unsafe.Pointer(&a.Q), unsafe.Pointer(&a.KCache), unsafe.Pointer(&a.VCache), unsafe.Pointer(&a.Pos0),
		unsafe.Pointer(&a.Sinks), unsafe.Pointer(&a.T), unsafe.Pointer(&a.Heads), unsafe.Pointer(&a.KVHeads),
		unsafe.Pointer(&a.Ring), unsafe.Pointer(&a.Window), unsafe.Pointer(&a.Scale), unsafe.Pointer(&a.Softcap),
		unsafe.Pointer(&a.NSplit), unsafe.Pointer(&a.QStride), unsafe.Pointer(&a.KNew), unsafe.Pointer(&a.VNew),
		unsafe.Pointer(&a.InvFreq), unsafe.Pointer(&a.RotDims), unsafe.Pointer(&a.NeoX), unsafe.Pointer(&a.MScale))
}

// Launch: one block of 128 threads per (kv head, split, token); static
// shared memory only.
func (a *AttnDecode1Args) Launch() Geometry {
	return geo(uint32(a.KVHeads), uint32(a.NSplit), uint32(a.T), 128, 0)
}

// Decode1MaxSplits is the most splits ck_attn_dec1_* combines.
const Decode1MaxSplits = 64

// Decode1Name is the ck_attn_dec1_* instance for a cache element kv ("f32"
// or "f16"), head dim hd (64, 128; 16 with groups up to 4) and group
// (query heads per kv head, up to 8), or "" when none serves them (the
// two-pass kernels do).
func Decode1Name(kv string, hd, group int, nsplit int32) string {
	if (kv != "f32" && kv != "f16") || (hd != 16 && hd != 64 && hd != 128) || group < 1 || group > 8 || nsplit < 1 || nsplit > Decode1MaxSplits {
		return ""
	}
	if hd == 16 && group > 4 { // the tiny test models' heads: groups of up to 4
		return ""
	}
	gm := 4
	if group > 4 {
		gm = 8
	}
	return fmt.Sprintf("%s%s_%d_%d", AttnDecode1Prefix, kv, hd, gm)
}

type AttnCombineArgs struct {
	Out, PartO, PartML, Sinks Ptr
	T, Heads, HeadDim, NSplit int32
}

func (a *AttnCombineArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Out), unsafe.Pointer(&a.PartO), unsafe.Pointer(&a.PartML), unsafe.Pointer(&a.Sinks),
		unsafe.Pointer(&a.T), unsafe.Pointer(&a.Heads), unsafe.Pointer(&a.HeadDim), unsafe.Pointer(&a.NSplit))
}

// Launch: HeadDim threads (HeadDim >= 32), NSplit <= 256.
func (a *AttnCombineArgs) Launch() Geometry {
	return geo(uint32(a.Heads), uint32(a.T), 1, uint32(a.HeadDim), 0)
}

// AttnPrefillArgs: causal attention of T queries (positions *Pos0+t) over the
// cache, which already holds the chunk's own K/V.
type AttnPrefillArgs struct {
	Out, Q, KCache, VCache, Pos0     Ptr
	T, Heads, KVHeads, HeadDim, Ring int32
	Window                           int32
	Scale, Softcap                   float32
	Sinks                            Ptr
	QStride                          int32 // floats between tokens' q rows; 0 = Heads*HeadDim
}

func (a *AttnPrefillArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Out), unsafe.Pointer(&a.Q), unsafe.Pointer(&a.KCache), unsafe.Pointer(&a.VCache),
		unsafe.Pointer(&a.Pos0), unsafe.Pointer(&a.T), unsafe.Pointer(&a.Heads), unsafe.Pointer(&a.KVHeads),
		unsafe.Pointer(&a.HeadDim), unsafe.Pointer(&a.Ring), unsafe.Pointer(&a.Window), unsafe.Pointer(&a.Scale),
		unsafe.Pointer(&a.Softcap), unsafe.Pointer(&a.Sinks), unsafe.Pointer(&a.QStride))
}

// PrefillQ is the queries per block of ck_attn_prefill_*; PrefillKT the keys
// per tile.
const (
	PrefillQ  = 32
	PrefillKT = 32
)

func (a *AttnPrefillArgs) Launch() Geometry {
	hd := int(a.HeadDim)
	sh := 4 * (PrefillQ*(hd+1) + PrefillKT*(hd+1) + PrefillKT*hd + PrefillQ*(PrefillKT+1))
	return geo(cdiv(int(a.T), PrefillQ), uint32(a.Heads), 1, 128, uint32(sh))
}

// LaunchTC is the geometry of ck_fa_prefill_* (tensor cores; HeadDim 64 or
// 128 only, see FATensorCores): 64 queries per block, 4 warps; the shared
// memory needs the opt-in (NeedsOptIn).
func (a *AttnPrefillArgs) LaunchTC() Geometry {
	hd := int(a.HeadDim)
	ld, pld := hd+8, 64+8
	sh := 2*(4*64*ld) + 4*(4*16*64) + 2*(2*4*16*pld) + 4*(4*16*hd) + 4*2*64
	return geo(cdiv(int(a.T), 64), uint32(a.Heads), 1, 128, uint32(sh))
}

// FlashName is the ck_flash_prefill_* entry for a cache type ("f32",
// "f16") and head dim (64 or 128: FATensorCores).
func FlashName(kv string, headDim int) string {
	return fmt.Sprintf("%s%s_%d", FlashPrefix, kv, headDim)
}

// LaunchFlash is the geometry of ck_flash_prefill_* (FATensorCores head
// dims): 64 queries per block, 4 warps, the latest queries' blocks first;
// shared memory one f16 K and V tile of 64 keys (rows of HeadDim+8) and
// the next tile's K and V as the cache holds them (sized for f32): above
// 48 KiB, so it needs the opt-in.
func (a *AttnPrefillArgs) LaunchFlash() Geometry {
	hd := int(a.HeadDim)
	return geo(cdiv(int(a.T), 64), uint32(a.Heads), 1, 128, uint32(2*64*(hd+8)*2+2*64*hd*4))
}

// FATensorCores reports whether ck_fa_prefill_* takes this head dim.
func FATensorCores(headDim int) bool { return headDim == 64 || headDim == 128 }

// RopeKVArgs: RoPE on Q (in place) and K, K and V written to cache rows
// (*Pos0+t) % Ring, in one launch. Token t's rows start at Q+t*QStride,
// K+t*KVStride, V+t*KVStride (floats); RotDims 0 = no rotation.
type RopeKVArgs struct {
	Q, K, V, KCache, VCache, Pos0, InvFreq Ptr
	T, Heads, KVHeads, HeadDim, RotDims    int32
	NeoX                                   int32
	MScale                                 float32
	QStride, KVStride, Ring                int32
}

func (a *RopeKVArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Q), unsafe.Pointer(&a.K), unsafe.Pointer(&a.V), unsafe.Pointer(&a.KCache),
		unsafe.Pointer(&a.VCache), unsafe.Pointer(&a.Pos0), unsafe.Pointer(&a.InvFreq), unsafe.Pointer(&a.T),
		unsafe.Pointer(&a.Heads), unsafe.Pointer(&a.KVHeads), unsafe.Pointer(&a.HeadDim), unsafe.Pointer(&a.RotDims),
		unsafe.Pointer(&a.NeoX), unsafe.Pointer(&a.MScale), unsafe.Pointer(&a.QStride), unsafe.Pointer(&a.KVStride),
		unsafe.Pointer(&a.Ring))
}
func (a *RopeKVArgs) Launch() Geometry { return geo(uint32(a.T), uint32(a.Heads+a.KVHeads), 1, 64, 0) }

// ActMulArgs: Out[t][i] = act(G[t*GStride+i]) * U[t*UStride+i].
type ActMulArgs struct {
	Out, G, U              Ptr
	T, N, GStride, UStride int32
	Act                    int32
}

func (a *ActMulArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Out), unsafe.Pointer(&a.G), unsafe.Pointer(&a.U), unsafe.Pointer(&a.T),
		unsafe.Pointer(&a.N), unsafe.Pointer(&a.GStride), unsafe.Pointer(&a.UStride), unsafe.Pointer(&a.Act))
}
func (a *ActMulArgs) Launch() Geometry { return geo(cdiv(int(a.N), 256), uint32(a.T), 1, 256, 0) }

// MatvecArgs: Y = W·X (+R); with W2 != 0, Y = act(W·X) * (W2·X). With
// NormW != 0 the kernel first replaces X by rmsnorm(X)·NormW (·(1+NormW)
// with PlusOne=1; Eps as the model's) — the norm's own launch is saved.
type MatvecArgs struct {
	Y, W, W2, X, R       Ptr
	Rows, Cols, RowBytes int32
	Act                  int32
	NormW                Ptr
	Eps                  float32
	PlusOne              int32
}

func (a *MatvecArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Y), unsafe.Pointer(&a.W), unsafe.Pointer(&a.W2), unsafe.Pointer(&a.X),
		unsafe.Pointer(&a.R), unsafe.Pointer(&a.Rows), unsafe.Pointer(&a.Cols), unsafe.Pointer(&a.RowBytes),
		unsafe.Pointer(&a.Act), unsafe.Pointer(&a.NormW), unsafe.Pointer(&a.Eps), unsafe.Pointer(&a.PlusOne))
}

// MatvecRows is the output rows per block of ck_mv_*.
const MatvecRows = 8

func (a *MatvecArgs) Launch() Geometry { return geo(cdiv(int(a.Rows), MatvecRows), 1, 1, 128, 0) }

// Int8Codecs have ck_mvq_* kernels: MatvecArgs as ck_mv_*, the activation
// rounded to int8 per 32 inside each block (the CPU's Int8 mode), then
// __dp4a. Launch them with LaunchInt8.
var Int8Codecs = []string{"q8_0", "q4_0", "q4_K", "q6_K"}

// MatvecInt8Rows is the output rows per block of ck_mvq_*: 16 warps of one
// row, or of 4 rows when rows >= 32768 (an lm head: the block's
// quantization of x is then shared by 64 rows). matvec.cu's
// mvq_rows_per_warp is the same rule.
func MatvecInt8Rows(rows int) int {
	if rows >= 32768 {
		return 64
	}
	return 16
}

// LaunchInt8 is the geometry of ck_mvq_*: 512 threads, the quantized
// activation (Cols int8 + Cols/32 float2) in dynamic shared memory.
func (a *MatvecArgs) LaunchInt8() Geometry {
	return geo(cdiv(int(a.Rows), MatvecInt8Rows(int(a.Rows))), 1, 1, 512, uint32(a.Cols+8*(a.Cols/32)))
}

// MatvecBatchArgs: the same for N (1..MaxBatch) columns, X [N][Cols], Y [N][Rows].
type MatvecBatchArgs struct {
	Y, W, W2, X, R       Ptr
	Rows, Cols, RowBytes int32
	Act                  int32
	N                    int32
}

func (a *MatvecBatchArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Y), unsafe.Pointer(&a.W), unsafe.Pointer(&a.W2), unsafe.Pointer(&a.X),
		unsafe.Pointer(&a.R), unsafe.Pointer(&a.Rows), unsafe.Pointer(&a.Cols), unsafe.Pointer(&a.RowBytes),
		unsafe.Pointer(&a.Act), unsafe.Pointer(&a.N))
}

// MatvecBatchRows is the output rows per block of ck_mvb_*.
const MatvecBatchRows = 4

func (a *MatvecBatchArgs) Launch() Geometry {
	return geo(cdiv(int(a.Rows), MatvecBatchRows), 1, 1, 128, 0)
}

// GemmArgs: Y[T][Rows] = X[T][Cols] · Wᵀ (+R).
type GemmArgs struct {
	Y, W, X, R           Ptr
	Rows, Cols, RowBytes int32
	T                    int32
}

func (a *GemmArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Y), unsafe.Pointer(&a.W), unsafe.Pointer(&a.X), unsafe.Pointer(&a.R),
		unsafe.Pointer(&a.Rows), unsafe.Pointer(&a.Cols), unsafe.Pointer(&a.RowBytes), unsafe.Pointer(&a.T))
}

// GEMM tile: GemmBN weight rows × GemmBM tokens × GemmBK columns per step;
// Cols must be a multiple of GemmBK.
const (
	GemmBN = 128
	GemmBM = 64
	GemmBK = 64
)

func (a *GemmArgs) Launch() Geometry {
	return geo(cdiv(int(a.Rows), GemmBN), cdiv(int(a.T), GemmBM), 1, 256, gemmShared)
}

// gemmShared: f16 tiles of W (BN×(BK+8)) and X (BM×(BK+8)).
const gemmShared = 2 * (GemmBN + GemmBM) * (GemmBK + 8)

// QuantQ8Args: XQ[t][Cols] int8 and XDS[t][Cols/32] float2 {d, d·Σq}: row
// t of X (X[t*XStride+i]), or act(X)·U (U[t*UStride+i]) when U != 0,
// rounded per 32 (d = amax/127, round half to even) — the input of
// ck_mmq_*. Cols is a multiple of 32; X, U and their strides 16-byte aligned.
type QuantQ8Args struct {
	XQ, XDS, X, U    Ptr
	T, Cols          int32
	XStride, UStride int32
	Act              int32
}

func (a *QuantQ8Args) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.XQ), unsafe.Pointer(&a.XDS), unsafe.Pointer(&a.X), unsafe.Pointer(&a.U),
		unsafe.Pointer(&a.T), unsafe.Pointer(&a.Cols), unsafe.Pointer(&a.XStride), unsafe.Pointer(&a.UStride),
		unsafe.Pointer(&a.Act))
}
func (a *QuantQ8Args) Launch() Geometry { return geo(cdiv(int(a.Cols), 1024), uint32(a.T), 1, 256, 0) }

// QuantBytes is the size of ck_quant_q8's output for rows×cols values:
// the int8 values, then (16-byte aligned) the float2 scales.
func QuantBytes(rows, cols int) (q, ds int) { return (rows*cols + 15) &^ 15, rows * cols / 32 * 8 }

// GemmQArgs: Y[T][Rows] = XQ · Wᵀ (+R) for a weight in one of Int8Codecs,
// XQ/XDS as ck_quant_q8 leaves them; Cols a multiple of GemmBK.
type GemmQArgs struct {
	Y, W, XQ, XDS, R     Ptr
	Rows, Cols, RowBytes int32
	T                    int32
	Small                bool // 64-token tiles (ck_mmqs_*): not a kernel parameter
}

func (a *GemmQArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Y), unsafe.Pointer(&a.W), unsafe.Pointer(&a.XQ), unsafe.Pointer(&a.XDS),
		unsafe.Pointer(&a.R), unsafe.Pointer(&a.Rows), unsafe.Pointer(&a.Cols), unsafe.Pointer(&a.RowBytes),
		unsafe.Pointer(&a.T))
}

// GemmQBN is the weight rows per block of ck_mmq_*/ck_mmqs_*; GemmQBM the
// tokens (GemmQBMSmall for ck_mmqs_*).
const (
	GemmQBN      = 128
	GemmQBM      = 128
	GemmQBMSmall = 64
)

func (a *GemmQArgs) tokens() int {
	if a.Small {
		return GemmQBMSmall
	}
	return GemmQBM
}

// Launch: 256 threads; shared memory two stages of int8 tiles (80-byte
// rows) and float2 scales: 2·(BM+BN)·96 bytes (48 KiB at BM 128).
func (a *GemmQArgs) Launch() Geometry {
	bm := a.tokens()
	return geo(cdiv(int(a.Rows), GemmQBN), cdiv(int(a.T), bm), 1, 256, uint32(2*(bm+GemmQBN)*96))
}

// GemmQSmall reports whether a T×rows product should take ck_mmqs_*
// (64-token tiles): when 128-token tiles would fill at most half of the
// device's sms multiprocessors (measured on the H200: 512 tokens × 2048
// rows run 1.4× faster in 64-token tiles, × 3072 rows 1.15× slower).
func GemmQSmall(T, rows, sms int) bool {
	return 2*int(cdiv(T, GemmQBM))*int(cdiv(rows, GemmQBN)) <= sms
}

// ArgmaxRowsArgs: IDs[t] = argmax(Logits[t]) (lowest id on ties).
type ArgmaxRowsArgs struct {
	IDs, Logits Ptr
	T, Vocab    int32
}

func (a *ArgmaxRowsArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.IDs), unsafe.Pointer(&a.Logits), unsafe.Pointer(&a.T), unsafe.Pointer(&a.Vocab))
}
func (a *ArgmaxRowsArgs) Launch() Geometry { return geo(uint32(a.T), 1, 1, 1024, 0) }

// ArgmaxStepArgs: the greedy step of a CUDA graph: id = argmax(Logits);
// State[1] = id; Hist[State[2] % HistLen] = id; State[2]++; State[0]++.
type ArgmaxStepArgs struct {
	Logits      Ptr
	Vocab       int32
	State, Hist Ptr
	HistLen     int32
}

func (a *ArgmaxStepArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Logits), unsafe.Pointer(&a.Vocab), unsafe.Pointer(&a.State), unsafe.Pointer(&a.Hist),
		unsafe.Pointer(&a.HistLen))
}
func (a *ArgmaxStepArgs) Launch() Geometry { return geo(1, 1, 1, 1024, 0) }

// AdvanceArgs: State[0] += N.
type AdvanceArgs struct {
	State Ptr
	N     int32
}

func (a *AdvanceArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.State), unsafe.Pointer(&a.N))
}
func (a *AdvanceArgs) Launch() Geometry { return geo(1, 1, 1, 1, 0) }

// CheckMatrix reports why the kernels cannot run a rows×cols weight of
// codec (nil when they can): the codec, and cols a multiple of the block
// and of 32 (matvec, embed) or of GemmBK (gemm, prefill).
func CheckMatrix(codec string, rows, cols int, gemm bool) error {
	l, ok := layouts[codec]
	switch {
	case !ok:
		return fmt.Errorf("cuda kernels: codec %s not supported", codec)
	case rows <= 0 || cols <= 0 || cols%l.block != 0 || cols%32 != 0:
		return fmt.Errorf("cuda kernels: %s %dx%d: columns not a multiple of %d", codec, rows, cols, max(l.block, 32))
	case gemm && cols%GemmBK != 0:
		return fmt.Errorf("cuda kernels: %s %dx%d: GEMM needs columns a multiple of %d", codec, rows, cols, GemmBK)
	}
	return nil
}

// CheckAttention reports why the attention kernels cannot run a layer
// (nil when they can): head dim a multiple of 4 and at most 256, whole
// groups, G*headDim <= 2048 for decode. Use FATensorCores for the choice of
// prefill kernel.
func CheckAttention(heads, kvHeads, headDim int) error {
	switch {
	case heads <= 0 || kvHeads <= 0 || heads%kvHeads != 0:
		return fmt.Errorf("cuda kernels: %d heads over %d kv heads", heads, kvHeads)
	case headDim < 32 || headDim > 256 || headDim%4 != 0:
		return fmt.Errorf("cuda kernels: head dim %d (want 32..256, a multiple of 4)", headDim)
	case heads/kvHeads*headDim > 2048:
		return fmt.Errorf("cuda kernels: %d query heads per kv head of dim %d (decode takes at most 2048 values per group)", heads/kvHeads, headDim)
	}
	return nil
}

// MatvecPairArgs is ck_mvq2_<a>_<b>: Y = [WA·X; WB·X] (+R), RowsA rows of
// WA in codec a, then RowsB of WB in codec b, X quantized to int8 once per
// block as in ck_mvq_* (NormW, Eps, PlusOne as MatvecArgs'): one launch for
// a layer's [q;k] and a v of another codec. One row a warp: RowsA and
// RowsB under 32768 (PairRows).
type MatvecPairArgs struct {
	Y, WA, WB, X, R      Ptr
	RowsA, RowsB, Cols   int32
	RowBytesA, RowBytesB int32
	NormW                Ptr
	Eps                  float32
	PlusOne              int32
}

func (a *MatvecPairArgs) Params() []unsafe.Pointer {
	return params(unsafe.Pointer(&a.Y), unsafe.Pointer(&a.WA), unsafe.Pointer(&a.WB), unsafe.Pointer(&a.X),
		unsafe.Pointer(&a.R), unsafe.Pointer(&a.RowsA), unsafe.Pointer(&a.RowsB), unsafe.Pointer(&a.Cols),
		unsafe.Pointer(&a.RowBytesA), unsafe.Pointer(&a.RowBytesB), unsafe.Pointer(&a.NormW), unsafe.Pointer(&a.Eps),
		unsafe.Pointer(&a.PlusOne))
}

// PairRows bounds RowsA and RowsB of ck_mvq2_* (16 rows a block).
const PairRows = 32768

// Launch: 16 of WA's rows a block, then 16 of WB's; 512 threads.
func (a *MatvecPairArgs) Launch() Geometry {
	n := cdiv(int(a.RowsA), 16) + cdiv(int(a.RowsB), 16)
	return geo(n, 1, 1, 512, uint32(a.Cols+8*(a.Cols/32)))
}

// MatvecPairs are the codec pairs (a, b) with a ck_mvq2_<a>_<b> kernel.
var MatvecPairs = [][2]string{{"q4_K", "q6_K"}}

// MatvecPairName is the ck_mvq2_* kernel for codecs a and b, or "" when
// there is none.
func MatvecPairName(a, b string) string {
	for _, p := range MatvecPairs {
		if p == [2]string{a, b} {
			return "ck_mvq2_" + a + "_" + b
		}
	}
	return ""
}

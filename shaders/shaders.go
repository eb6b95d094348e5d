// Package shaders is cortiq's one WGSL kernel set, shared by the native
// WebGPU backend (wgpu-native) and the browser build. It is the only WGSL in
// the project.
//
// The sources keep to the subset both wgpu-native v0.19+ (as bundled by
// github.com/cogentcore/webgpu) and browsers accept: no `enable f16`, no
// subgroups, no `override`, no packed-dot built-ins. Half-precision data is
// read as packed u32 and widened with unpack2x16float.
//
// Weight-reading kernels (embedding gather, matmul, the staged decode
// matvec, the tiled GEMM) are written once against a codec prelude over the
// storage array `w: array<vec4<u32>>`: fetch4(e, soff) returns weight
// elements e..e+3 (e a multiple of 4, counted over the whole tensor in
// row-major order), and fetchc(e, soff) the CHUNK elements from e (4 f32,
// 8 f16, 16 q8_0, 32 q4_0, one 32-element sub-block of q4_K, one 16-element
// scale group of q6_K), e a multiple of CHUNK. fetchq and chunkscales split
// fetchc for kernels that scale a chunk's sum once: fetchq gives the raw
// quants q, chunkscales (a, b) with value = a·q − b (b is 0 unless the
// codec is AFFINE, as q4_K with its sub-block mins is). A matmul's inner
// dimension must be a multiple of the codec's CHUNK (ChunkOf). Each
// codec's GPU side is one DeviceCodec record (codecs.go: chunk, planar or
// not, device block, pack function, prelude files). Weight layouts on the
// device:
//
//	f32, f16  the tensor's bytes unchanged.
//	q8_0      repacked at upload (see RepackQ8_0): a quant plane of 8 u32 per
//	          32-element block, then a scale plane (f16 pairs) from u32 soff.
//	q4_0      repacked the same way (see RepackQ4_0): 4 u32 of nibbles per
//	          block, then the f16 scale plane.
//	iq4_nl, mxfp4, q4_1, q5_0, q5_1
//	          repacked the same way: 4 u32 of nibbles per block, then a
//	          scale plane of 1 (mxfp4's exponent), 2 (iq4_nl's d), 4 (q4_1's
//	          d and m), 6 (q5_0's fifth bits and d) or 8 bytes (q5_1's d, m
//	          and fifth bits) a block.
//	iq4_xs    a quant plane of 32 u32 of nibbles per 256-element
//	          super-block, then 2 u32 per super-block (d and the scales).
//	tq2_0     a quant plane of 16 u32 of 2-bit codes per super-block, 16
//	          consecutive elements a word, then the f16 d plane.
//	tq1_0     a quant plane of GGUF's 48 bytes of five base-3 digits per
//	          super-block, then 6 bytes per super-block (its 4 bytes of four
//	          digits, d).
//	q4_K      GGUF's 144-byte super-blocks in place, their scales and
//	          nibbles reordered (RepackQ4_K; rows of 256s).
//	q6_K      GGUF's 210-byte super-blocks, each padded to 224 bytes (PadQ6_K).
//	q5_K, q3_K, q2_K
//	          GGUF's blocks, each zero-padded to a multiple of 16 bytes
//	          (PadBlocks), read byte by byte (codec_blocks.wgsl).
//	iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m
//	          padded the same way, then the codec's grid (GridTail) from u32
//	          word soff.
//	q8_row, q4_tiled, q4tp, q2tp, q1, q1g, q1t
//	          the seed's codecs (tensor/seed.go), padded the same way.
//
// Greedy decoding picks on the device in two steps (argmax_part over spans
// of the logits, argmax over the spans' picks); long steps run attention
// tiled (attn_prefill), one-token steps split over the span (attention with
// split_len, attn_combine).
//
// Activations are f32 throughout.
//
// Every kernel's interface is one entry of the kernel table (kernels.go:
// Kernels, Lookup): its bindings and a Go params struct whose fields mirror
// the WGSL `struct P` (params.go), packed by Pack; TestKernelTable holds
// each source variant to its entry.
package shaders

import (
	"embed"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cortiq/cortiq/tensor"
)

//go:embed *.wgsl
var files embed.FS

func read(name string) string {
	b, err := files.ReadFile(name + ".wgsl")
	if err != nil {
		panic("shaders: missing embedded " + name + ".wgsl") // a build defect, not input
	}
	return expandParams(string(b))
}

// Kernel names of the self-contained modules (see Module for the others).
const (
	QKVPrep   = "qkv_prep"
	Attention = "attention"
	// AttentionPrep is Attention for one-token steps with QKVPrep's work
	// fused in (attention_prep_load.wgsl).
	AttentionPrep = "attention_prep"
	ActMul        = "act_mul"
	Argmax        = "argmax"
	ArgmaxPart    = "argmax_part"
	Advance       = "advance"
	Combine       = "attn_combine"

	// Image kernels (the VAE decoder): f32 HWC activations.
	Conv2D         = "conv2d"
	GroupNormStats = "group_norm_stats"
	GroupNormApply = "group_norm_apply"
	CopyF32        = "copy_f32"
	AttentionFull  = "attention_full"

	// Transformer-block kernels of the image DiT: f32 rows (its linears
	// are the prefill GEMM, its attention AttentionTiled; see image.go).
	RowsNorm = "rows_norm"
	QKRope   = "qk_rope"
)

// PadBlocks lays a padded codec's GGUF blocks out for the device: each
// block's bytes at their offsets, zero-padded to DeviceBlockBytes so every
// block starts on a 16-byte boundary. dst is reused when large enough.
func PadBlocks(dst, src []byte, c tensor.Codec) ([]byte, error) {
	bb, db := c.BlockBytes(), DeviceBlockBytes(c)
	if len(src)%bb != 0 {
		return nil, fmt.Errorf("shaders: %d bytes is not a whole number of %d-byte %s blocks", len(src), bb, c)
	}
	n := len(src) / bb
	if cap(dst) < n*db {
		dst = make([]byte, n*db)
	}
	dst = dst[:n*db]
	for b := 0; b < n; b++ {
		o, in := dst[b*db:(b+1)*db], src[b*bb:(b+1)*bb]
		copy(o, in)
		clear(o[bb:])
	}
	return dst, nil
}

// Embed is the embedding-gather module for weights of codec c.
func Embed(c tensor.Codec) (string, error) {
	pre, err := codecPrelude(c)
	if err != nil {
		return "", err
	}
	return read("embed") + "\n" + pre, nil
}

// Matmul is the matmul module for weights of codec c computing tb tokens per
// workgroup (1 for the decode matvec; 8 for prefill GEMM) and one output
// row per workgroup: the grid's x/y count rows. See MatmulRows.
func Matmul(c tensor.Codec, tb int) (string, error) { return MatmulRows(c, tb, 1) }

// MatmulRows is the matmul module computing r consecutive output rows for
// tb tokens per workgroup: the grid's x/y count blocks of r rows.
func MatmulRows(c tensor.Codec, tb, r int) (string, error) { return matmulRows(c, tb, r, false) }

// MatmulRowsNorm is MatmulRows multiplying by the RMSNorm of x (see
// matmul.wgsl): one more binding, 6, for the norm weights.
func MatmulRowsNorm(c tensor.Codec, tb, r int) (string, error) { return matmulRows(c, tb, r, true) }

func matmulRows(c tensor.Codec, tb, r int, norm bool) (string, error) {
	if tb < 1 || tb > 16 {
		return "", fmt.Errorf("shaders: matmul token block %d out of range 1..16", tb)
	}
	if r < 1 || r > 16 || r*tb > 48 { // workgroup memory: 288 bytes per output
		return "", fmt.Errorf("shaders: matmul row block %d (token block %d) out of range", r, tb)
	}
	pre, err := codecPreludeShared(c)
	if err != nil {
		return "", err
	}
	no := r * tb
	nn := no
	xload := "let xv = x[xt[k] + xo + q];"
	decl, normY, normGU := "", "", ""
	if norm {
		nn = no + tb
		decl = "@group(0) @binding(6) var<storage, read> nw: array<vec4<f32>>;"
		xload = `let xr = x[xt[k] + xo + q];
                    acc[NO + k] += dot(xr, xr);
                    let xv = xr * (nw[xo + q] + vec4<f32>(f32((p.act >> 1u) & 1u)));`
		rms := `let sb = (NO + k) * 8u;
                let ss = ((red2[sb] + red2[sb + 1u]) + (red2[sb + 2u] + red2[sb + 3u])) +
                         ((red2[sb + 4u] + red2[sb + 5u]) + (red2[sb + 6u] + red2[sb + 7u]));
                let rr = 1.0 / sqrt(ss / f32(p.cols) + p.eps);`
		normY = rms + "\n            y *= rr;"
		normGU = rms + "\n                g *= rr;\n                u *= rr;"
	}
	// Array sizes must be literals for wgpu-native's WGSL front end.
	src := strings.NewReplacer("__TB__", fmt.Sprint(tb), "__R__", fmt.Sprint(r),
		"__NO__", fmt.Sprint(no), "__NN__", fmt.Sprint(nn), "__RED__", fmt.Sprint(64*nn), "__RED2__", fmt.Sprint(8*nn),
		"__CQ__", fmt.Sprint(ChunkOf(c)/4), "__XLOAD__", xload, "__NORMDECL__", decl,
		"__NORMY__", normY, "__NORMGU__", normGU, "__MATMUL_IO__", read("matmul_io")).Replace(read("matmul"))
	return src + "\n" + pre, nil
}

// MatmulIO is the parameters and bindings every matmul-shaped kernel
// declares (matmul_io.wgsl): a kernel that starts with it binds like the
// matmul module (benchmarks build stripped-down kernels on it).
func MatmulIO() string { return read("matmul_io") }

// RMSNorm is the RMSNorm module; inPlace selects the variant that
// normalizes a read_write buffer in place (binding 3) instead of reading
// binding 3 and writing binding 4.
func RMSNorm(inPlace bool) string {
	src := read("rmsnorm")
	if inPlace {
		src = strings.ReplaceAll(src, "out[", "x[")
		return strings.Replace(src, "__IO__",
			"@group(0) @binding(3) var<storage, read_write> x: array<f32>;", 1)
	}
	return strings.Replace(src, "__IO__",
		"@group(0) @binding(3) var<storage, read> x: array<f32>;\n"+
			"@group(0) @binding(4) var<storage, read_write> out: array<f32>;", 1)
}

// Source returns a self-contained module by name (QKVPrep, Attention, Combine,
// ActMul, Argmax, ArgmaxPart, Advance).
func Source(name string) (string, error) {
	switch name {
	case QKVPrep, Attention, AttentionPrep:
		return SourceKV(name, false)
	case Combine, ActMul, Advance, Conv2D, GroupNormStats, GroupNormApply, CopyF32, AttentionFull,
		RowsNorm, QKRope, NormAdd, Conv2DTiled:
		return read(name), nil
	case Argmax, ArgmaxPart:
		return read("argmax_pick") + read(name), nil
	}
	return "", fmt.Errorf("shaders: no module %q", name)
}

// RepackQ4_K lays q4_K super-blocks (144 bytes) out for the device, each
// in place: d and dmin as they are, the 6-bit scales and mins re-split
// (see below), then the 128 bytes of nibbles
// reordered so that sub-block s is the 16 bytes from byte 16 + 16·s with
// element l < 16 in the low nibble of byte l and element l + 16 in its
// high nibble (GGUF stores sub-blocks 2p and 2p+1 as the low and high
// nibbles of the same 32 bytes). The values are GGUF's exactly; dst is
// reused when large enough.
func RepackQ4_K(dst, src []byte) ([]byte, error) {
	if len(src)%144 != 0 {
		return nil, fmt.Errorf("shaders: %d bytes is not a whole number of 144-byte q4_K blocks", len(src))
	}
	if cap(dst) < len(src) {
		dst = make([]byte, len(src))
	}
	dst = dst[:len(src)]
	for b := 0; b < len(src); b += 144 {
		in, out := src[b:b+144], dst[b:b+144]
		copy(out[:4], in[:4]) // d, dmin
		// The sixteen 6-bit scales and mins, re-split so a kernel takes
		// any one with two shifts: low nibbles of sc[0..7] in word 1 and of
		// m[0..7] in word 2 (4 bits each), their top two bits in word 3
		// (sc[j] at bit 2j, m[j] at bit 16+2j).
		var w1, w2, w3 uint32
		for j := 0; j < 8; j++ {
			sc, m := scaleMinK4(j, in[4:16])
			w1 |= uint32(sc&0xF) << (4 * j)
			w2 |= uint32(m&0xF) << (4 * j)
			w3 |= uint32(sc>>4)<<(2*j) | uint32(m>>4)<<(16+2*j)
		}
		binary.LittleEndian.PutUint32(out[4:], w1)
		binary.LittleEndian.PutUint32(out[8:], w2)
		binary.LittleEndian.PutUint32(out[12:], w3)
		for p := 0; p < 4; p++ {
			q := in[16+32*p : 16+32*p+32]
			lo, hi := out[16+32*p:16+32*p+16], out[16+32*p+16:16+32*p+32]
			for l := 0; l < 16; l++ {
				lo[l] = q[l]&0x0F | q[l+16]<<4
				hi[l] = q[l]>>4 | q[l+16]&0xF0
			}
		}
	}
	return dst, nil
}

// scaleMinK4 is GGUF's get_scale_min_k4: sub-block j's 6-bit scale and
// min from a q4_K block's 12 scale bytes.
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q6KDeviceBlock is the bytes of one q6_K super-block on the device.
const Q6KDeviceBlock = 224

// PadQ6_K lays q6_K super-blocks (210 bytes) out for the device: each one
// padded with zeros to Q6KDeviceBlock bytes, so every block starts on a
// 16-byte boundary; the bytes keep their offsets within the block.
func PadQ6_K(dst, src []byte) ([]byte, error) {
	if len(src)%210 != 0 {
		return nil, fmt.Errorf("shaders: %d bytes is not a whole number of 210-byte q6_K blocks", len(src))
	}
	n := len(src) / 210
	if cap(dst) < n*Q6KDeviceBlock {
		dst = make([]byte, n*Q6KDeviceBlock)
	}
	dst = dst[:n*Q6KDeviceBlock]
	for b := 0; b < n; b++ {
		o := dst[b*Q6KDeviceBlock : (b+1)*Q6KDeviceBlock]
		copy(o, src[b*210:(b+1)*210])
		clear(o[210:])
	}
	return dst, nil
}

// AttnPrefill is the tiled attention for long steps (attn_prefill.wgsl):
// the attention module's bindings and uniform, one workgroup per head and
// 64 tokens, for a head dimension hd that is a multiple of 4 up to 128
// (its query and output rows live in registers).
func AttnPrefill(hd int) (string, error) { return AttnPrefillRows(hd, AttnPrefillBlock) }

// SourceKV is QKVPrep or Attention for a KV cache of f32 elements or, with
// f16, of halves packed two per u32 (head_dim a multiple of 4).
func SourceKV(name string, f16 bool) (string, error) {
	codec := "f32"
	if f16 {
		codec = "f16"
	}
	switch name {
	case QKVPrep:
		return read("kv_write_"+codec) + read("head_prep") + read(name), nil
	case Attention:
		return read("kv_read_"+codec) + read("attention_io") + read("attention_fns") + read("attention_load") + read(name), nil
	case AttentionPrep:
		return read("kv_rw_"+codec) + read("attention_prep_io") + read("attention_fns") + read("head_prep") + read("attention_prep_load") + read(Attention), nil
	}
	return "", fmt.Errorf("shaders: no KV module %q", name)
}

// AttnPrefillBlock is the tokens (threads) one workgroup of AttnPrefill
// takes.
const AttnPrefillBlock = 64

// AttnPrefillRows is AttnPrefill with bq tokens per workgroup (16..256, a
// multiple of 16): dispatch (heads, ceil(ntok/bq), 1).
func AttnPrefillRows(hd, bq int) (string, error) { return AttnPrefillKV(hd, bq, false) }

// AttnPrefillKV is AttnPrefillRows for a KV cache of f32 or (f16) packed
// halves.
func AttnPrefillKV(hd, bq int, f16 bool) (string, error) {
	if hd <= 0 || hd%4 != 0 || hd > 128 {
		return "", fmt.Errorf("shaders: tiled attention for head dim %d: want a multiple of 4 up to 128", hd)
	}
	if bq < 16 || bq > 256 || bq%16 != 0 {
		return "", fmt.Errorf("shaders: tiled attention with %d tokens per workgroup: want a multiple of 16 up to 256", bq)
	}
	kv := read("kv_read_f32")
	if f16 {
		kv = read("kv_read_f16")
	}
	const bk = 16 // keys per tile: K and V tiles of 16·hd floats, 16 KiB at hd 128
	return strings.NewReplacer("__HD4__", fmt.Sprint(hd/4), "__HD__", fmt.Sprint(hd), "__BK__", fmt.Sprint(bk),
		"__BQ__", fmt.Sprint(bq), "__TILE__", fmt.Sprint(bk*hd/4)).Replace(kv + read("attention_io") + read("attention_fns") + read("attn_prefill")), nil
}

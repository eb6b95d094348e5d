package kernel

import (
	"encoding/binary"
	"math"

	"github.com/cortiq/cortiq/tensor"
)

// Int8-mode prefill of the symmetric lowbit codecs (level AVX512VNNI):
// MatMul packs them once per tensor into the int8 tiles of gemm_int8.go.
// iq4_nl and iq4_xs keep their nibbles (q4_0's tile layout, 5 bits a
// weight with the scale) and the tile looks each up in the code book plus
// 128 (gemmLUT4VNNI); q5_0 is widened to q8_0's tiles (w+128, 8.5 bits a
// weight). Their MatVec (decode) does not use the tiles: the lowbit_int8
// dots read the original, smaller bytes. mxfp4 is left out: it holds
// mostly MoE experts (gpt-oss), where prefill would in time pack every
// expert and the tiles would double the model's resident size; its
// prefill stays Exact (on the SIMD decoders).

// lut4Codec reports whether c packs as code-book nibbles.
func lut4Codec(c tensor.Codec) bool { return c == tensor.IQ4_NL || c == tensor.IQ4_XS }

// lowbitPackable reports whether MatMul packs c for the int8 tiles.
func lowbitPackable(c tensor.Codec) bool { return lut4Codec(c) || c == tensor.Q5_0 }

// iq4LUT is the code book plus 128, the tiles' unsigned operand.
var iq4LUT = lut128(&iq4Values)

func lut128(v *[16]int8) (t [16]byte) {
	for i, x := range v {
		t[i] = byte(int(x) + 128)
	}
	return t
}

// packLowbitBlock writes block b of row r of the 16-row group dst (one
// block's stride) from the encoded row src.
func packLowbitBlock(c tensor.Codec, dst, src []byte, r, b int) {
	var qs []byte
	var d float32
	switch c {
	case tensor.Q5_0:
		o := unpackLowbit(c, src[22*b:22*b+22], 0)
		for i, w := range o.w {
			dst[64*(i/4)+4*r+i%4] = byte(w) ^ 0x80
		}
		binary.LittleEndian.PutUint32(dst[512+4*r:], math.Float32bits(o.dw0))
		return
	case tensor.IQ4_NL:
		qs, d = src[18*b+2:18*b+18], f16le(src[18*b:])
	case tensor.IQ4_XS:
		o := unpackLowbit(c, src[136*(b/8):136*(b/8)+136], b%8)
		qs, d = src[136*(b/8)+8+16*(b%8):][:16], o.dw0
	}
	for q := range 4 {
		copy(dst[64*q+4*r:64*q+4*r+4], qs[4*q:4*q+4])
	}
	binary.LittleEndian.PutUint32(dst[256+4*r:], math.Float32bits(d))
}

package kernel

import (
	"encoding/binary"
	"math"

	"github.com/cortiq/cortiq/tensor"
)

// Int8-mode prefill of the lowbit codecs (level AVX512VNNI): MatMul packs
// them once per tensor into the int8 tiles of gemm_int8.go (q2_K and q3_K,
// whose 16-element sub-blocks the tiles cannot scale, stay Exact).
// iq4_nl and iq4_xs keep their nibbles (q4_0's tile layout, 5 bits a
// weight with the scale) and the tile looks each up in the code book plus
// 128 (gemmLUT4VNNI); q5_0 is widened to q8_0's tiles (w+128, 8.5 bits a
// weight). Their MatVec (decode) does not use the tiles: the lowbit_int8
// dots read the original, smaller bytes. mxfp4 is left out: it holds
// mostly MoE experts (gpt-oss), where prefill would in time pack every
// expert and the tiles would double the model's resident size; its
// prefill stays Exact (on the SIMD decoders).

// q4_1 packs as q4_K's tiles (its nibbles, the scale d and the min −m:
// the tile subtracts min·dx·Σq), and q5_1 and q5_K as five-bit tiles
// (gemmQ5MVNNI: q4_K's with a plane of fifth bits, 7 bits a weight).

// q5Codec reports whether c packs as five-bit tiles.
func q5Codec(c tensor.Codec) bool { return c == tensor.Q5_1 || c == tensor.Q5_K }

// lut4Codec reports whether c packs as code-book nibbles.
func lut4Codec(c tensor.Codec) bool { return c == tensor.IQ4_NL || c == tensor.IQ4_XS }

// lowbitPackable reports whether MatMul packs c for the int8 tiles.
func lowbitPackable(c tensor.Codec) bool {
	return lowbitInt8 && (lut4Codec(c) || q5Codec(c) || c == tensor.Q5_0 || c == tensor.Q4_1)
}

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
	case tensor.Q4_1:
		blk := src[20*b : 20*b+20]
		for q := range 4 {
			copy(dst[64*q+4*r:64*q+4*r+4], blk[4+4*q:8+4*q])
		}
		binary.LittleEndian.PutUint32(dst[256+4*r:], math.Float32bits(f16le(blk)))
		binary.LittleEndian.PutUint32(dst[320+4*r:], math.Float32bits(-f16le(blk[2:])))
		return
	case tensor.Q5_1, tensor.Q5_K:
		var o lbBlock
		var mn float32
		if c == tensor.Q5_1 {
			o = unpackLowbit(c, src[24*b:24*b+24], 0)
			mn = -o.mf
		} else {
			o = unpackLowbit(c, src[176*(b/8):176*(b/8)+176], b%8)
			mn = o.mf * float32(o.mi0) // dmin·m, as tensor.Dequantize
		}
		for q := range 4 {
			for j := range 4 {
				lo, hi := byte(o.w[4*q+j]), byte(o.w[16+4*q+j])
				dst[64*q+4*r+j] = lo&15 | hi<<4
				dst[256+16*q+(4*r+j)/8] |= lo >> 4 << ((4*r + j) % 8)
				dst[264+16*q+(4*r+j)/8] |= hi >> 4 << ((4*r + j) % 8)
			}
		}
		binary.LittleEndian.PutUint32(dst[320+4*r:], math.Float32bits(o.dw0))
		binary.LittleEndian.PutUint32(dst[384+4*r:], math.Float32bits(mn))
		return
	case tensor.Q5_0:
		o := unpackLowbit(c, src[22*b:22*b+22], 0)
		for i, w := range o.w {
			dst[64*(i/4)+4*r+i%4] = byte(w) ^ 0x80
		}
		copy(dst[512+2*r:512+2*r+2], src[22*b:22*b+2]) // d, as q8_0's tiles hold it
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

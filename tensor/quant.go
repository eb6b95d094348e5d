package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize decodes the encoded elements in src into dst. len(dst) is the
// number of elements: it must be a whole number of the codec's blocks, and
// src must hold exactly their encoded bytes. The math is that of ggml's
// reference dequantizers (ggml-quants.c), so results are bit-identical to
// llama.cpp's for the same bytes.
func Dequantize(dst []float32, c Codec, src []byte) error {
	if err := checkLens(c, len(dst), len(src)); err != nil {
		return fmt.Errorf("tensor: dequantize: %w", err)
	}
	switch c {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			DequantizeQ8_0Block((*[32]float32)(dst[32*b:]), (*[34]byte)(src[34*b:]))
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			DequantizeQ4_0Block((*[32]float32)(dst[32*b:]), (*[18]byte)(src[18*b:]))
		}
	case Q4_K:
		for b := 0; b < len(dst)/256; b++ {
			DequantizeQ4_KBlock((*[256]float32)(dst[256*b:]), (*[144]byte)(src[144*b:]))
		}
	case Q6_K:
		for b := 0; b < len(dst)/256; b++ {
			DequantizeQ6_KBlock((*[256]float32)(dst[256*b:]), (*[210]byte)(src[210*b:]))
		}
	case Q8_2F:
		return fmt.Errorf("tensor: dequantize: %s rows mean nothing without the tensor's column field: decode the tensor (DecodeRows)", c)
	case BLR:
		return fmt.Errorf("tensor: dequantize: %s is two factor matrices, not rows: decode the tensor (DecodeRows)", c)
	default:
		dec := blockDecoders[c]
		if dec == nil {
			return fmt.Errorf("tensor: dequantize: codec %s does not hold floats", c)
		}
		bl, bb := c.BlockLen(), c.BlockBytes()
		for b := 0; b < len(dst)/bl; b++ {
			dec(dst[bl*b:bl*(b+1)], src[bb*b:bb*(b+1)])
		}
	}
	return nil
}

func checkLens(c Codec, n, nbytes int) error {
	if !c.Valid() {
		return fmt.Errorf("unknown codec %d", uint8(c))
	}
	rb, err := c.RowBytes(n)
	if err != nil {
		return err
	}
	if nbytes != rb {
		return fmt.Errorf("%d %s elements need %d bytes, have %d", n, c, rb, nbytes)
	}
	return nil
}

// DequantizeQ8_0Block decodes one q8_0 block: x = d·q.
func DequantizeQ8_0Block(dst *[32]float32, b *[34]byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(b[0:]))
	for i := range 32 {
		dst[i] = float32(int8(b[2+i])) * d
	}
}

// DequantizeQ4_0Block decodes one q4_0 block: x = (q-8)·d, low nibbles are
// elements 0..15, high nibbles 16..31.
func DequantizeQ4_0Block(dst *[32]float32, b *[18]byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(b[0:]))
	for i := range 16 {
		q := b[2+i]
		dst[i] = float32(int32(q&0xf)-8) * d
		dst[i+16] = float32(int32(q>>4)-8) * d
	}
}

// Q4KScaleMin unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12 packed bytes of a q4_K super-block.
func Q4KScaleMin(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// DequantizeQ4_KBlock decodes one q4_K super-block (144 bytes: f16 d, f16
// dmin, 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles). Eight
// sub-blocks of 32: x = d·sc·q - dmin·m. Each 32-byte run of qs holds two
// sub-blocks: low nibbles first, then high nibbles.
func DequantizeQ4_KBlock(dst *[256]float32, b *[144]byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(b[0:]))
	dmin := F16ToF32(binary.LittleEndian.Uint16(b[2:]))
	scales := b[4:16]
	qs := b[16:144]
	for j := 0; j < 4; j++ {
		sc1, m1 := Q4KScaleMin(2*j, scales)
		sc2, m2 := Q4KScaleMin(2*j+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*j : 32*j+32]
		out := dst[64*j : 64*j+64]
		for l := range 32 {
			// The explicit conversions keep the product rounded before
			// the subtraction (no fused multiply-add), as in C.
			out[l] = float32(d1*float32(q[l]&0xf)) - mm1
			out[l+32] = float32(d2*float32(q[l]>>4)) - mm2
		}
	}
}

// DequantizeQ6_KBlock decodes one q6_K super-block (210 bytes: 128 bytes of
// low nibbles ql, 64 bytes of high bit pairs qh, 16 int8 scales, f16 d).
// x = d·scale·(q-32) with 6-bit q, sixteen sub-blocks of 16.
func DequantizeQ6_KBlock(dst *[256]float32, b *[210]byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(b[208:]))
	for n := 0; n < 2; n++ {
		ql := b[64*n : 64*n+64]
		qh := b[128+32*n : 128+32*n+32]
		sc := b[192+8*n : 192+8*n+8]
		y := dst[128*n : 128*n+128]
		for l := range 32 {
			is := l / 16
			q1 := int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
			q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
			q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			y[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
			y[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
			y[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
			y[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
		}
	}
}

// Quantize encodes src into dst with codec c; dst must be exactly the
// encoded size. Block codecs use ggml's reference quantizers
// (quantize_row_*_ref), so the bytes match llama.cpp's for the same input.
// q4_K, q6_K and the codecs of lowbitq.go use a simple (non-searching)
// scale choice: valid, decodable blocks, but not llama.cpp's exact bytes.
func Quantize(dst []byte, c Codec, src []float32) error {
	if err := checkLens(c, len(src), len(dst)); err != nil {
		return fmt.Errorf("tensor: quantize: %w", err)
	}
	switch c {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/32; b++ {
			QuantizeQ8_0Block((*[34]byte)(dst[34*b:]), (*[32]float32)(src[32*b:]))
		}
	case Q4_0:
		for b := 0; b < len(src)/32; b++ {
			QuantizeQ4_0Block((*[18]byte)(dst[18*b:]), (*[32]float32)(src[32*b:]))
		}
	case Q4_K:
		for b := 0; b < len(src)/256; b++ {
			quantizeQ4_KBlock((*[144]byte)(dst[144*b:]), (*[256]float32)(src[256*b:]))
		}
	case Q6_K:
		for b := 0; b < len(src)/256; b++ {
			quantizeQ6_KBlock((*[210]byte)(dst[210*b:]), (*[256]float32)(src[256*b:]))
		}
	case Q8_2F:
		return fmt.Errorf("tensor: quantize: %s chooses a column field over the whole matrix: encode the tensor (EncodeTensor)", c)
	case BLR:
		return fmt.Errorf("tensor: quantize: %s factors the whole matrix: encode the tensor (EncodeTensor)", c)
	default:
		enc := blockEncoders[c]
		if enc == nil {
			return fmt.Errorf("tensor: quantize: codec %s does not hold floats", c)
		}
		bl, bb := c.BlockLen(), c.BlockBytes()
		for b := 0; b < len(src)/bl; b++ {
			enc(dst[bb*b:bb*(b+1)], src[bl*b:bl*(b+1)])
		}
	}
	return nil
}

// QuantizeQ8_0Block is ggml's quantize_row_q8_0_ref for one block:
// d = amax/127, q = round(x/d) (half away from zero).
func QuantizeQ8_0Block(dst *[34]byte, x *[32]float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst[0:], F32ToF16(d))
	for i, v := range x {
		dst[2+i] = byte(int8(math.Round(float64(v * id))))
	}
}

// QuantizeQ4_0Block is ggml's quantize_row_q4_0_ref for one block: d =
// m/-8 where m is the element of largest magnitude (with its sign), q =
// min(15, trunc(x/d + 8.5)).
func QuantizeQ4_0Block(dst *[18]byte, x *[32]float32) {
	var amax, m float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, m = a, v
		}
	}
	d := m / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst[0:], F32ToF16(d))
	for i := range 16 {
		q0 := min(15, int8(float32(x[i]*id)+8.5))
		q1 := min(15, int8(float32(x[i+16]*id)+8.5))
		dst[2+i] = byte(q0) | byte(q1)<<4
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

package tensor

import (
	"encoding/binary"
	"math"
)

// Decoders of GGUF's other block types. Each follows ggml's reference
// dequantizer (ggml-quants.c, and gguf-py's quants.py, which matches it) in
// the order of its float32 operations, so the values are bit-identical to
// llama.cpp's. Products are converted to float32 before any addition so that
// the compiler cannot fuse them into a multiply-add that C does not do.

// blockDecoders decodes one block of the codec (dst holds BlockLen values,
// src BlockBytes bytes).
var blockDecoders = [NumCodecs]func(dst []float32, src []byte){
	Q4_1:    decodeQ4_1,
	Q5_0:    decodeQ5_0,
	Q5_1:    decodeQ5_1,
	Q2_K:    decodeQ2_K,
	Q3_K:    decodeQ3_K,
	Q5_K:    decodeQ5_K,
	IQ4_NL:  decodeIQ4_NL,
	IQ4_XS:  decodeIQ4_XS,
	IQ3_XXS: decodeIQ3_XXS,
	IQ3_S:   decodeIQ3_S,
	IQ2_XXS: decodeIQ2_XXS,
	IQ2_XS:  decodeIQ2_XS,
	IQ2_S:   decodeIQ2_S,
	IQ1_S:   decodeIQ1_S,
	IQ1_M:   decodeIQ1_M,
	TQ1_0:   decodeTQ1_0,
	TQ2_0:   decodeTQ2_0,
	MXFP4:   decodeMXFP4,
}

func f16At(b []byte, off int) float32 { return F16ToF32(binary.LittleEndian.Uint16(b[off:])) }

// q4_1: f16 d, f16 m, 16 bytes of nibbles (low: elements 0..15, high:
// 16..31). x = d·q + m.
func decodeQ4_1(y []float32, b []byte) {
	d, m := f16At(b, 0), f16At(b, 2)
	for j := range 16 {
		q := b[4+j]
		y[j] = float32(d*float32(q&0xf)) + m
		y[j+16] = float32(d*float32(q>>4)) + m
	}
}

// q5_0: f16 d, 32 high bits (bit j is element j's fifth bit), nibbles.
// x = d·(q-16).
func decodeQ5_0(y []float32, b []byte) {
	d := f16At(b, 0)
	qh := binary.LittleEndian.Uint32(b[2:])
	for j := range 16 {
		q := b[6+j]
		x0 := int32(q&0xf|byte(qh>>j&1)<<4) - 16
		x1 := int32(q>>4|byte(qh>>(j+16)&1)<<4) - 16
		y[j] = float32(x0) * d
		y[j+16] = float32(x1) * d
	}
}

// q5_1: f16 d, f16 m, 32 high bits, nibbles. x = d·q + m.
func decodeQ5_1(y []float32, b []byte) {
	d, m := f16At(b, 0), f16At(b, 2)
	qh := binary.LittleEndian.Uint32(b[4:])
	for j := range 16 {
		q := b[8+j]
		x0 := q&0xf | byte(qh>>j&1)<<4
		x1 := q>>4 | byte(qh>>(j+16)&1)<<4
		y[j] = float32(d*float32(x0)) + m
		y[j+16] = float32(d*float32(x1)) + m
	}
}

// q2_K: 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit quants, f16 d,
// f16 dmin. Sixteen sub-blocks of 16: x = d·sc·q - dmin·m.
func decodeQ2_K(y []float32, b []byte) {
	scales, qs := b[0:16], b[16:80]
	d, dmin := f16At(b, 80), f16At(b, 82)
	is := 0
	for n := 0; n < 2; n++ {
		q := qs[32*n : 32*n+32]
		for j := 0; j < 4; j++ {
			shift := 2 * j
			for half := 0; half < 2; half++ {
				sc := scales[is]
				is++
				dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
				out := y[128*n+32*j+16*half:]
				for l := range 16 {
					out[l] = float32(dl*float32(q[16*half+l]>>shift&3)) - ml
				}
			}
		}
	}
}

// q3_K: 32 bytes of high-bit mask, 64 bytes of 2-bit quants, 12 bytes of
// packed 6-bit scales, f16 d. Sixteen sub-blocks of 16: x = d·(sc-32)·q
// where q = low two bits minus 4 when the mask bit is clear.
func decodeQ3_K(y []float32, b []byte) {
	hm, qs, sb := b[0:32], b[32:96], b[96:108]
	d := f16At(b, 108)
	var sc [16]int8
	for i := range 16 {
		lo := sb[i%8] >> (4 * (i / 8)) & 0xf
		hi := sb[8+i%4] >> (2 * (i / 4)) & 3
		sc[i] = int8(lo|hi<<4) - 32
	}
	is := 0
	m := byte(1)
	for n := 0; n < 2; n++ {
		q := qs[32*n : 32*n+32]
		for j := 0; j < 4; j++ {
			shift := 2 * j
			for half := 0; half < 2; half++ {
				dl := d * float32(sc[is])
				is++
				out := y[128*n+32*j+16*half:]
				for l := range 16 {
					k := 16*half + l
					v := int32(q[k] >> shift & 3)
					if hm[k]&m == 0 {
						v -= 4
					}
					out[l] = dl * float32(v)
				}
			}
			m <<= 1
		}
	}
}

// q5_K: f16 d, f16 dmin, q4_K's 12 bytes of 6-bit scales and mins, 32 bytes
// of fifth bits, 128 bytes of nibbles. x = d·sc·q - dmin·m per 32.
func decodeQ5_K(y []float32, b []byte) {
	d, dmin := f16At(b, 0), f16At(b, 2)
	scales, qh, ql := b[4:16], b[16:48], b[48:176]
	for j := 0; j < 4; j++ {
		sc1, m1 := Q4KScaleMin(2*j, scales)
		sc2, m2 := Q4KScaleMin(2*j+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		q := ql[32*j : 32*j+32]
		u1, u2 := byte(1)<<(2*j), byte(2)<<(2*j)
		for l := range 32 {
			x0, x1 := q[l]&0xf, q[l]>>4
			if qh[l]&u1 != 0 {
				x0 += 16
			}
			if qh[l]&u2 != 0 {
				x1 += 16
			}
			y[64*j+l] = float32(d1*float32(x0)) - mm1
			y[64*j+32+l] = float32(d2*float32(x1)) - mm2
		}
	}
}

// iq4nlValues is IQ4_NL's and IQ4_XS's non-linear code book.
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// iq4_nl: f16 d, nibbles (low: 0..15, high: 16..31) into the code book.
func decodeIQ4_NL(y []float32, b []byte) {
	d := f16At(b, 0)
	for j := range 16 {
		q := b[2+j]
		y[j] = d * float32(iq4nlValues[q&0xf])
		y[j+16] = d * float32(iq4nlValues[q>>4])
	}
}

// iq4_xs: f16 d, 16 bits of scale high pairs, 4 bytes of scale nibbles, 128
// bytes of code-book nibbles. Eight sub-blocks of 32 with 6-bit scales:
// x = d·(ls-32)·v.
func decodeIQ4_XS(y []float32, b []byte) {
	d := f16At(b, 0)
	sh := binary.LittleEndian.Uint16(b[2:])
	sl, qs := b[4:8], b[8:136]
	for ib := range 8 {
		ls := int32(sl[ib/2]>>(4*(ib%2))&0xf) | int32(sh>>(2*ib)&3)<<4
		dl := d * float32(ls-32)
		q := qs[16*ib : 16*ib+16]
		out := y[32*ib:]
		for j := range 16 {
			out[j] = dl * float32(iq4nlValues[q[j]&0xf])
			out[j+16] = dl * float32(iq4nlValues[q[j]>>4])
		}
	}
}

// tq1_0: 48 bytes of five base-3 digits each, 4 bytes of four digits each,
// f16 d. A digit is recovered as (uint8(q·3^n)·3)>>8; x = (digit-1)·d.
func decodeTQ1_0(y []float32, b []byte) {
	qs, qh := b[0:48], b[48:52]
	d := f16At(b, 52)
	pow3 := [5]uint8{1, 3, 9, 27, 81}
	o := 0
	trit := func(q byte, n int) float32 {
		v := q * pow3[n]
		return float32(int16(uint16(v)*3>>8) - 1)
	}
	for n := range 5 {
		for m := range 32 {
			y[o] = trit(qs[m], n) * d
			o++
		}
	}
	for n := range 5 {
		for m := range 16 {
			y[o] = trit(qs[32+m], n) * d
			o++
		}
	}
	for n := range 4 {
		for j := range 4 {
			y[o] = trit(qh[j], n) * d
			o++
		}
	}
}

// tq2_0: 64 bytes of 2-bit codes (four planes of 32 per 32 bytes), f16 d.
// x = (q-1)·d.
func decodeTQ2_0(y []float32, b []byte) {
	d := f16At(b, 64)
	for j := 0; j < 2; j++ {
		for l := range 4 {
			for m := range 32 {
				q := int32(b[32*j+m]>>(2*l)&3) - 1
				y[128*j+32*l+m] = float32(q) * d
			}
		}
	}
}

// mxfp4Values is the e2m1 code book doubled (ggml's kvalues_mxfp4); the
// e8m0 scale is halved to match.
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E8M0Half is ggml's ggml_e8m0_to_fp32_half: 2^(e-128).
func E8M0Half(e uint8) float32 {
	var bits uint32
	if e < 2 {
		bits = 0x00200000 << e
	} else {
		bits = uint32(e-1) << 23
	}
	return math.Float32frombits(bits)
}

// mxfp4: e8m0 exponent, 16 bytes of nibbles (low: 0..15, high: 16..31).
func decodeMXFP4(y []float32, b []byte) {
	d := E8M0Half(b[0])
	for j := range 16 {
		q := b[1+j]
		y[j] = float32(mxfp4Values[q&0xf]) * d
		y[j+16] = float32(mxfp4Values[q>>4]) * d
	}
}

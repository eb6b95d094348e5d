package kernel

import (
	"encoding/binary"

	"github.com/cortiq/cortiq/tensor"
)

// Int8-mode arithmetic of the GGUF codecs beyond q8_0/q4_0/q4_K/q6_K
// (q4_1, q5_0, q5_1, q2_K, q3_K, q5_K, iq4_nl, iq4_xs, mxfp4), defined
// here once in portable Go; the SIMD kernels (lowbit_int8_amd64.s) compute
// the same float32 operations in the same order, so that their results are
// bit-identical to these loops at every level.
//
// The activation is quantized as for q8_0 (int8 per 32-block, scale dx).
// Each 32-element block of a weight row gives 32 integer weights w (q5_0's
// q-16, q3_K's signed 3-bit values, the iq4/mxfp4 code-book values, …) and
// weight scales dw0 for elements 0..15 and dw1 for 16..31 (equal except
// for q2_K and q3_K, whose sub-blocks have 16 elements). Eight integer
// lanes L[j] = Σ_{i=4j}^{4j+3} w[i]·xq[i] (exact in int32) accumulate as
//
//	acc[j] += float32(L[j]) · (dw·dx)
//
// and a codec with a minimum adds the float min times dx·Σxq into one
// scalar sum m (q4_1, q5_1), or dmin·dx times the integer −Σ m_sub·Σxq_sub
// over the block's sub-blocks into mv[b mod 8] (q2_K, q5_K: one lane per
// block of a super-block). With hsum(a) = ((a0+a4) + (a2+a6)) + ((a1+a5) +
// (a3+a7)), the row's result is
//
//	(hsum(acc) + m) + hsum(mv).
//
// Every product and sum is rounded to float32 (no fused multiply-adds).

// lowbitInt8 puts the codecs below in Int8 mode (MatVec from AVX2, MatMul
// tiles at AVX512VNNI). Set to false, Int8 mode leaves them Exact, as
// before these kernels (the SIMD decoders stay).
const lowbitInt8 = true

// lowbitInt8Codecs are the codecs with an Int8 kernel defined here.
var lowbitInt8Codecs = []tensor.Codec{
	tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K,
	tensor.Q6_K, tensor.IQ4_NL, tensor.IQ4_XS, tensor.MXFP4,
}

func init() {
	for _, c := range lowbitInt8Codecs {
		c := c
		genericInt8Kernels[c] = int8RowsGeneric(func(row []byte, qx *q8x) float32 { return dotLowbitInt8(c, row, qx) })
	}
}

// iq4Values is IQ4_NL's and IQ4_XS's code book (ggml's kvalues_iq4nl).
var iq4Values = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// mxfp4Values is ggml's kvalues_mxfp4 (e2m1 doubled; the scale is halved).
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0HalfTable is tensor.E8M0Half of every byte (mxfp4's block scale).
var e8m0HalfTable = func() *[256]float32 {
	var t [256]float32
	for e := range t {
		t[e] = tensor.E8M0Half(uint8(e))
	}
	return &t
}()

// Minimum kinds of a lowbit block.
const (
	minNone  = iota
	minFloat // m += float32(mf·s_b), s_b = dx·Σxq
	minInt   // mv[b%8] += float32(float32(mf·dx)·float32(−(mi0·hs0 + mi1·hs1)))
)

// lbBlock is one 32-element block of a lowbit row, unpacked for the
// Int8 arithmetic.
type lbBlock struct {
	w        [32]int8
	dw0, dw1 float32
	kind     int
	mf       float32
	mi0, mi1 int32
}

func f16le(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }

// unpackLowbit unpacks 32-block k (of the codec's block or super-block sb).
func unpackLowbit(c tensor.Codec, sb []byte, k int) (o lbBlock) {
	nib := func(qs []byte) { // low nibbles 0..15, high 16..31
		for j := range 16 {
			o.w[j], o.w[j+16] = int8(qs[j]&15), int8(qs[j]>>4)
		}
	}
	switch c {
	case tensor.Q4_1:
		o.dw0, o.kind, o.mf = f16le(sb), minFloat, f16le(sb[2:])
		nib(sb[4:20])
	case tensor.Q5_0, tensor.Q5_1:
		off := 2
		if c == tensor.Q5_1 {
			o.kind, o.mf, off = minFloat, f16le(sb[2:]), 4
		}
		o.dw0 = f16le(sb)
		qh := binary.LittleEndian.Uint32(sb[off:])
		nib(sb[off+4 : off+20])
		for j := range 32 {
			o.w[j] |= int8(qh>>j&1) << 4
			if c == tensor.Q5_0 {
				o.w[j] -= 16
			}
		}
	case tensor.IQ4_NL:
		o.dw0 = f16le(sb)
		nib(sb[2:18])
		for j := range o.w {
			o.w[j] = iq4Values[o.w[j]]
		}
	case tensor.MXFP4:
		o.dw0 = e8m0HalfTable[sb[0]]
		nib(sb[1:17])
		for j := range o.w {
			o.w[j] = mxfp4Values[o.w[j]]
		}
	case tensor.IQ4_XS:
		d := f16le(sb)
		sh := binary.LittleEndian.Uint16(sb[2:])
		ls := int32(sb[4+k/2]>>(4*(k%2))&0xf) | int32(sh>>(2*k)&3)<<4
		o.dw0 = d * float32(ls-32)
		nib(sb[8+16*k : 24+16*k])
		for j := range o.w {
			o.w[j] = iq4Values[o.w[j]]
		}
	case tensor.Q4_K:
		d := f16le(sb)
		sc, m := tensor.Q4KScaleMin(k, sb[4:16])
		o.dw0, o.kind, o.mf = d*float32(sc), minInt, f16le(sb[2:])
		o.mi0, o.mi1 = int32(m), int32(m)
		ql := sb[16+32*(k/2):]
		for l := range 32 {
			o.w[l] = int8(ql[l] >> (4 * (k % 2)) & 15)
		}
	case tensor.Q6_K:
		d := f16le(sb[208:])
		o.dw0, o.dw1 = d*float32(int8(sb[192+2*k])), d*float32(int8(sb[192+2*k+1]))
		n, j := k/4, k%4
		ql, qh := sb[64*n+32*(j%2):], sb[128+32*n:]
		for l := range 32 {
			o.w[l] = int8(ql[l]>>(4*(j/2))&15|(qh[l]>>(2*j)&3)<<4) - 32
		}
	case tensor.Q5_K:
		d := f16le(sb)
		sc, m := tensor.Q4KScaleMin(k, sb[4:16])
		o.dw0, o.kind, o.mf = d*float32(sc), minInt, f16le(sb[2:])
		o.mi0, o.mi1 = int32(m), int32(m)
		qh, ql := sb[16:48], sb[48+32*(k/2):]
		for l := range 32 {
			o.w[l] = int8(ql[l]>>(4*(k%2))&15 | (qh[l]>>k&1)<<4)
		}
	case tensor.Q2_K:
		d := f16le(sb[80:])
		s0, s1 := sb[2*k], sb[2*k+1]
		o.dw0, o.dw1 = d*float32(s0&15), d*float32(s1&15)
		o.kind, o.mf, o.mi0, o.mi1 = minInt, f16le(sb[82:]), int32(s0>>4), int32(s1>>4)
		qs := sb[16+32*(k/4):]
		for l := range 32 {
			o.w[l] = int8(qs[l] >> (2 * (k % 4)) & 3)
		}
	case tensor.Q3_K:
		d := f16le(sb[108:])
		sc := func(i int) int32 {
			lo := sb[96+i%8] >> (4 * (i / 8)) & 0xf
			hi := sb[104+i%4] >> (2 * (i / 4)) & 3
			return int32(lo|hi<<4) - 32
		}
		o.dw0, o.dw1 = d*float32(sc(2*k)), d*float32(sc(2*k+1))
		hm, qs := sb[0:32], sb[32+32*(k/4):]
		for l := range 32 {
			v := int8(qs[l] >> (2 * (k % 4)) & 3)
			if hm[l]>>k&1 == 0 {
				v -= 4
			}
			o.w[l] = v
		}
	default:
		panic("kernel: no Int8 arithmetic for " + c.String())
	}
	if c != tensor.Q2_K && c != tensor.Q3_K && c != tensor.Q6_K {
		o.dw1 = o.dw0
	}
	return o
}

// dotLowbitInt8 is the reference Int8 dot of one row (see above).
func dotLowbitInt8(c tensor.Codec, row []byte, qx *q8x) float32 {
	bl, bb := c.BlockLen(), c.BlockBytes()
	per := bl / 32
	var acc, mv [8]float32
	var m float32
	for b := range qx.d {
		o := unpackLowbit(c, row[(b/per)*bb:(b/per+1)*bb], b%per)
		dx := qx.d[b]
		xq := qx.q[32*b : 32*b+32]
		f0, f1 := float32(o.dw0*dx), float32(o.dw1*dx)
		for j := range 8 {
			var l int32
			for i := 4 * j; i < 4*j+4; i++ {
				l += int32(o.w[i]) * int32(xq[i])
			}
			f := f0
			if j >= 4 {
				f = f1
			}
			acc[j] = acc[j] + float32(float32(l)*f)
		}
		switch o.kind {
		case minFloat:
			m = m + float32(o.mf*qx.s[b])
		case minInt:
			mi := -(o.mi0*qx.hs[2*b] + o.mi1*qx.hs[2*b+1])
			mv[b%8] = mv[b%8] + float32(float32(o.mf*dx)*float32(mi))
		}
	}
	return float32(hsum8(&acc)+m) + hsum8(&mv)
}

// hsum8 is the lane sum of the SIMD kernels.
func hsum8(a *[8]float32) float32 {
	return float32(float32(a[0]+a[4])+float32(a[2]+a[6])) + float32(float32(a[1]+a[5])+float32(a[3]+a[7]))
}

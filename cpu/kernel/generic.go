package kernel

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"

	"github.com/cortiq/cortiq/tensor"
)

// This file is the portable reference: fused decode-and-dot loops in plain
// Go, one per codec. Faster architecture-specific kernels replace entries of
// the dispatch tables at init and are tested against these.

// rowsKernel computes y[i] = row_i · x for the len(y) consecutive encoded
// rows in data (rb bytes each). aux holds per-call precomputed data about x
// (see prepareX).
type rowsKernel func(y []float32, data []byte, rb int, x, aux []float32)

var genericKernels = [tensor.NumCodecs]rowsKernel{
	tensor.F32:  genericRows(dotF32Row),
	tensor.F16:  genericRows(dotF16Row),
	tensor.BF16: genericRows(dotBF16Row),
	tensor.Q8_0: genericRows(dotQ8_0Row),
	tensor.Q4_0: genericRows(dotQ4_0Row),
	tensor.Q4_K: q4KRows,
	tensor.Q6_K: genericRows(dotQ6_KRow),
}

// matvecKernels is the dispatch table; architecture files replace entries.
var matvecKernels = genericKernels

func matvecKernel(c tensor.Codec) rowsKernel { return matvecKernels[c] }

// prepareX computes what a codec's kernel wants to know about x once per
// call: for q4_K, the sum of each 32-element block (the min term); for
// q4_0, its negation (the -8 offset).
func prepareX(c tensor.Codec, x []float32) []float32 {
	if c != tensor.Q4_K && c != tensor.Q4_0 {
		return nil
	}
	s := make([]float32, len(x)/32)
	for j := range s {
		var a float32
		for _, v := range x[32*j : 32*j+32] {
			a += v
		}
		if c == tensor.Q4_0 {
			a = -a
		}
		s[j] = a
	}
	return s
}

func genericRows(dot func(row []byte, x []float32) float32) rowsKernel {
	return func(y []float32, data []byte, rb int, x, _ []float32) {
		for i := range y {
			y[i] = dot(data[i*rb:(i+1)*rb], x)
		}
	}
}

// f32View reinterprets little-endian float32 bytes without copying when
// the slice is suitably aligned and the machine little-endian; ok is
// false otherwise.
func f32View(b []byte) (v []float32, ok bool) {
	if len(b) == 0 {
		return nil, true
	}
	if !littleEndian {
		return nil, false
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(b)/4), true
}

// littleEndian reports whether the machine stores numbers as the codecs do.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Dot is the float32 dot product of a and b[:len(a)].
func Dot(a, b []float32) float32 { return dotImpl(a, b) }

var dotImpl = dotGeneric

func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	// Sixteen at a time, as four rounds of the four-lane loop below (the
	// same additions in the same order): fewer loop trips, no bounds
	// checks (wasm pays for every trip through its loop dispatch).
	for ; i+16 <= len(a); i += 16 {
		aa, bb := (*[16]float32)(a[i:]), (*[16]float32)(b[i:])
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s0 += aa[4] * bb[4]
		s1 += aa[5] * bb[5]
		s2 += aa[6] * bb[6]
		s3 += aa[7] * bb[7]
		s0 += aa[8] * bb[8]
		s1 += aa[9] * bb[9]
		s2 += aa[10] * bb[10]
		s3 += aa[11] * bb[11]
		s0 += aa[12] * bb[12]
		s1 += aa[13] * bb[13]
		s2 += aa[14] * bb[14]
		s3 += aa[15] * bb[15]
	}
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF32Row(row []byte, x []float32) float32 {
	if w, ok := f32View(row); ok {
		return Dot(w, x)
	}
	var s float32
	for i := range x {
		s += math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:])) * x[i]
	}
	return s
}

var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = tensor.F16ToF32(uint16(i))
	}
	return &t
}()

func dotF16Row(row []byte, x []float32) float32 {
	row = row[:2*len(x)]
	var s0, s1, s2, s3 float32
	n8, n16 := len(x)&^7, len(x)&^15
	// Sixteen halves a trip, read as four 64-bit words: two rounds of the
	// eight-half loop below, the same additions in the same order.
	for i := 0; i < n16; i += 16 {
		r := (*[32]byte)(row[2*i:])
		xi := (*[16]float32)(x[i:])
		v0, v1 := binary.LittleEndian.Uint64(r[0:]), binary.LittleEndian.Uint64(r[8:])
		v2, v3 := binary.LittleEndian.Uint64(r[16:]), binary.LittleEndian.Uint64(r[24:])
		s0 += f16Table[uint16(v0)]*xi[0] + f16Table[uint16(v1)]*xi[4]
		s1 += f16Table[uint16(v0>>16)]*xi[1] + f16Table[uint16(v1>>16)]*xi[5]
		s2 += f16Table[uint16(v0>>32)]*xi[2] + f16Table[uint16(v1>>32)]*xi[6]
		s3 += f16Table[uint16(v0>>48)]*xi[3] + f16Table[uint16(v1>>48)]*xi[7]
		s0 += f16Table[uint16(v2)]*xi[8] + f16Table[uint16(v3)]*xi[12]
		s1 += f16Table[uint16(v2>>16)]*xi[9] + f16Table[uint16(v3>>16)]*xi[13]
		s2 += f16Table[uint16(v2>>32)]*xi[10] + f16Table[uint16(v3>>32)]*xi[14]
		s3 += f16Table[uint16(v2>>48)]*xi[11] + f16Table[uint16(v3>>48)]*xi[15]
	}
	for i := n16; i < n8; i += 8 {
		r := (*[16]byte)(row[2*i:])
		xi := (*[8]float32)(x[i:])
		s0 += f16Table[uint16(r[0])|uint16(r[1])<<8]*xi[0] + f16Table[uint16(r[8])|uint16(r[9])<<8]*xi[4]
		s1 += f16Table[uint16(r[2])|uint16(r[3])<<8]*xi[1] + f16Table[uint16(r[10])|uint16(r[11])<<8]*xi[5]
		s2 += f16Table[uint16(r[4])|uint16(r[5])<<8]*xi[2] + f16Table[uint16(r[12])|uint16(r[13])<<8]*xi[6]
		s3 += f16Table[uint16(r[6])|uint16(r[7])<<8]*xi[3] + f16Table[uint16(r[14])|uint16(r[15])<<8]*xi[7]
	}
	for i := n8; i < len(x); i++ {
		s0 += f16Table[binary.LittleEndian.Uint16(row[2*i:])] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func bf16(lo, hi byte) float32 { return math.Float32frombits(uint32(lo)<<16 | uint32(hi)<<24) }

func dotBF16Row(row []byte, x []float32) float32 {
	row = row[:2*len(x)]
	var s0, s1, s2, s3 float32
	n8 := len(x) &^ 7
	for i := 0; i < n8; i += 8 {
		r := (*[16]byte)(row[2*i:])
		xi := (*[8]float32)(x[i:])
		s0 += bf16(r[0], r[1])*xi[0] + bf16(r[8], r[9])*xi[4]
		s1 += bf16(r[2], r[3])*xi[1] + bf16(r[10], r[11])*xi[5]
		s2 += bf16(r[4], r[5])*xi[2] + bf16(r[12], r[13])*xi[6]
		s3 += bf16(r[6], r[7])*xi[3] + bf16(r[14], r[15])*xi[7]
	}
	for i := n8; i < len(x); i++ {
		s0 += bf16(row[2*i], row[2*i+1]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// i8Table and q4Table map a weight byte to its float value (a load is
// cheaper than an integer conversion in portable code).
var i8Table = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(int8(i))
	}
	return
}()

var q4Table = func() (t [16]float32) {
	for i := range t {
		t[i] = float32(i - 8)
	}
	return
}()

func dotQ8_0Row(row []byte, x []float32) float32 {
	var s float32
	nb := len(x) / 32
	row = row[:34*nb]
	// A block a trip, its weights read as four 64-bit words and converted
	// (exactly) in registers: the four-lane sums of the byte loop, the
	// same additions in the same order.
	for b := 0; b < nb; b++ {
		blk := (*[34]byte)(row[34*b:])
		xb := (*[32]float32)(x[32*b:])
		v0, v1 := binary.LittleEndian.Uint64(blk[2:]), binary.LittleEndian.Uint64(blk[10:])
		v2, v3 := binary.LittleEndian.Uint64(blk[18:]), binary.LittleEndian.Uint64(blk[26:])
		var s0, s1, s2, s3 float32
		s0 += float32(int8(v0)) * xb[0]
		s1 += float32(int8(v0>>8)) * xb[1]
		s2 += float32(int8(v0>>16)) * xb[2]
		s3 += float32(int8(v0>>24)) * xb[3]
		s0 += float32(int8(v0>>32)) * xb[4]
		s1 += float32(int8(v0>>40)) * xb[5]
		s2 += float32(int8(v0>>48)) * xb[6]
		s3 += float32(int8(v0>>56)) * xb[7]
		s0 += float32(int8(v1)) * xb[8]
		s1 += float32(int8(v1>>8)) * xb[9]
		s2 += float32(int8(v1>>16)) * xb[10]
		s3 += float32(int8(v1>>24)) * xb[11]
		s0 += float32(int8(v1>>32)) * xb[12]
		s1 += float32(int8(v1>>40)) * xb[13]
		s2 += float32(int8(v1>>48)) * xb[14]
		s3 += float32(int8(v1>>56)) * xb[15]
		s0 += float32(int8(v2)) * xb[16]
		s1 += float32(int8(v2>>8)) * xb[17]
		s2 += float32(int8(v2>>16)) * xb[18]
		s3 += float32(int8(v2>>24)) * xb[19]
		s0 += float32(int8(v2>>32)) * xb[20]
		s1 += float32(int8(v2>>40)) * xb[21]
		s2 += float32(int8(v2>>48)) * xb[22]
		s3 += float32(int8(v2>>56)) * xb[23]
		s0 += float32(int8(v3)) * xb[24]
		s1 += float32(int8(v3>>8)) * xb[25]
		s2 += float32(int8(v3>>16)) * xb[26]
		s3 += float32(int8(v3>>24)) * xb[27]
		s0 += float32(int8(v3>>32)) * xb[28]
		s1 += float32(int8(v3>>40)) * xb[29]
		s2 += float32(int8(v3>>48)) * xb[30]
		s3 += float32(int8(v3>>56)) * xb[31]
		s += f16Table[binary.LittleEndian.Uint16(blk[:])] * ((s0 + s1) + (s2 + s3))
	}
	return s
}

func dotQ4_0Row(row []byte, x []float32) float32 {
	var s float32
	nb := len(x) / 32
	row = row[:18*nb]
	// A block a trip, its nibbles read as two 64-bit words and converted
	// (exactly) in registers: the sums of the byte loop, the same
	// additions in the same order.
	for b := 0; b < nb; b++ {
		blk := (*[18]byte)(row[18*b:])
		xb := (*[32]float32)(x[32*b:])
		v0, v1 := binary.LittleEndian.Uint64(blk[2:]), binary.LittleEndian.Uint64(blk[10:])
		var s0, s1, s2, s3 float32
		s0 += q4w(v0, 0) * xb[0]
		s1 += q4w(v0, 4) * xb[16]
		s2 += q4w(v0, 8) * xb[1]
		s3 += q4w(v0, 12) * xb[17]
		s0 += q4w(v0, 16) * xb[2]
		s1 += q4w(v0, 20) * xb[18]
		s2 += q4w(v0, 24) * xb[3]
		s3 += q4w(v0, 28) * xb[19]
		s0 += q4w(v0, 32) * xb[4]
		s1 += q4w(v0, 36) * xb[20]
		s2 += q4w(v0, 40) * xb[5]
		s3 += q4w(v0, 44) * xb[21]
		s0 += q4w(v0, 48) * xb[6]
		s1 += q4w(v0, 52) * xb[22]
		s2 += q4w(v0, 56) * xb[7]
		s3 += q4w(v0, 60) * xb[23]
		s0 += q4w(v1, 0) * xb[8]
		s1 += q4w(v1, 4) * xb[24]
		s2 += q4w(v1, 8) * xb[9]
		s3 += q4w(v1, 12) * xb[25]
		s0 += q4w(v1, 16) * xb[10]
		s1 += q4w(v1, 20) * xb[26]
		s2 += q4w(v1, 24) * xb[11]
		s3 += q4w(v1, 28) * xb[27]
		s0 += q4w(v1, 32) * xb[12]
		s1 += q4w(v1, 36) * xb[28]
		s2 += q4w(v1, 40) * xb[13]
		s3 += q4w(v1, 44) * xb[29]
		s0 += q4w(v1, 48) * xb[14]
		s1 += q4w(v1, 52) * xb[30]
		s2 += q4w(v1, 56) * xb[15]
		s3 += q4w(v1, 60) * xb[31]
		s += f16Table[binary.LittleEndian.Uint16(blk[:])] * ((s0 + s1) + (s2 + s3))
	}
	return s
}

// q4w is the q4_0 weight (nibble - 8) at bit sh of v.
func q4w(v uint64, sh uint) float32 { return float32(int32(v>>sh&15) - 8) }

var u4Table = func() (t [16]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return
}()

var q6Table = func() (t [64]float32) {
	for i := range t {
		t[i] = float32(i - 32)
	}
	return
}()

// q4KRows is the portable q4_K kernel; xsum (from prepareX) holds Σx per
// 32-element sub-block for the min term.
func q4KRows(y []float32, data []byte, rb int, x, xsum []float32) {
	for i := range y {
		y[i] = dotQ4_KRowSums(data[i*rb:(i+1)*rb], x, xsum)
	}
}

func dotQ4_KRowSums(row []byte, x, xsum []float32) float32 {
	var s float32
	for b := 0; b < len(x)/256; b++ {
		blk := (*[144]byte)(row[144*b:])
		xb := (*[256]float32)(x[256*b:])
		xs := (*[8]float32)(xsum[8*b:])
		d := f16Table[binary.LittleEndian.Uint16(blk[0:])]
		dmin := f16Table[binary.LittleEndian.Uint16(blk[2:])]
		scales := blk[4:16]
		for j := 0; j < 4; j++ {
			sc1, m1 := tensor.Q4KScaleMin(2*j, scales)
			sc2, m2 := tensor.Q4KScaleMin(2*j+1, scales)
			q := (*[32]byte)(blk[16+32*j:])
			xl := (*[32]float32)(xb[64*j:])
			xh := (*[32]float32)(xb[64*j+32:])
			// The 32 bytes as four 64-bit words, nibbles converted in
			// registers: the sums of the byte loop, in its order.
			v0, v1 := binary.LittleEndian.Uint64(q[0:]), binary.LittleEndian.Uint64(q[8:])
			v2, v3 := binary.LittleEndian.Uint64(q[16:]), binary.LittleEndian.Uint64(q[24:])
			var l0, l1, h0, h1 float32
			l0 += float32(v0&15) * xl[0]
			h0 += float32(v0>>4&15) * xh[0]
			l1 += float32(v0>>8&15) * xl[1]
			h1 += float32(v0>>12&15) * xh[1]
			l0 += float32(v0>>16&15) * xl[2]
			h0 += float32(v0>>20&15) * xh[2]
			l1 += float32(v0>>24&15) * xl[3]
			h1 += float32(v0>>28&15) * xh[3]
			l0 += float32(v0>>32&15) * xl[4]
			h0 += float32(v0>>36&15) * xh[4]
			l1 += float32(v0>>40&15) * xl[5]
			h1 += float32(v0>>44&15) * xh[5]
			l0 += float32(v0>>48&15) * xl[6]
			h0 += float32(v0>>52&15) * xh[6]
			l1 += float32(v0>>56&15) * xl[7]
			h1 += float32(v0>>60&15) * xh[7]
			l0 += float32(v1&15) * xl[8]
			h0 += float32(v1>>4&15) * xh[8]
			l1 += float32(v1>>8&15) * xl[9]
			h1 += float32(v1>>12&15) * xh[9]
			l0 += float32(v1>>16&15) * xl[10]
			h0 += float32(v1>>20&15) * xh[10]
			l1 += float32(v1>>24&15) * xl[11]
			h1 += float32(v1>>28&15) * xh[11]
			l0 += float32(v1>>32&15) * xl[12]
			h0 += float32(v1>>36&15) * xh[12]
			l1 += float32(v1>>40&15) * xl[13]
			h1 += float32(v1>>44&15) * xh[13]
			l0 += float32(v1>>48&15) * xl[14]
			h0 += float32(v1>>52&15) * xh[14]
			l1 += float32(v1>>56&15) * xl[15]
			h1 += float32(v1>>60&15) * xh[15]
			l0 += float32(v2&15) * xl[16]
			h0 += float32(v2>>4&15) * xh[16]
			l1 += float32(v2>>8&15) * xl[17]
			h1 += float32(v2>>12&15) * xh[17]
			l0 += float32(v2>>16&15) * xl[18]
			h0 += float32(v2>>20&15) * xh[18]
			l1 += float32(v2>>24&15) * xl[19]
			h1 += float32(v2>>28&15) * xh[19]
			l0 += float32(v2>>32&15) * xl[20]
			h0 += float32(v2>>36&15) * xh[20]
			l1 += float32(v2>>40&15) * xl[21]
			h1 += float32(v2>>44&15) * xh[21]
			l0 += float32(v2>>48&15) * xl[22]
			h0 += float32(v2>>52&15) * xh[22]
			l1 += float32(v2>>56&15) * xl[23]
			h1 += float32(v2>>60&15) * xh[23]
			l0 += float32(v3&15) * xl[24]
			h0 += float32(v3>>4&15) * xh[24]
			l1 += float32(v3>>8&15) * xl[25]
			h1 += float32(v3>>12&15) * xh[25]
			l0 += float32(v3>>16&15) * xl[26]
			h0 += float32(v3>>20&15) * xh[26]
			l1 += float32(v3>>24&15) * xl[27]
			h1 += float32(v3>>28&15) * xh[27]
			l0 += float32(v3>>32&15) * xl[28]
			h0 += float32(v3>>36&15) * xh[28]
			l1 += float32(v3>>40&15) * xl[29]
			h1 += float32(v3>>44&15) * xh[29]
			l0 += float32(v3>>48&15) * xl[30]
			h0 += float32(v3>>52&15) * xh[30]
			l1 += float32(v3>>56&15) * xl[31]
			h1 += float32(v3>>60&15) * xh[31]
			s += d*float32(sc1)*(l0+l1) - dmin*float32(m1)*xs[2*j]
			s += d*float32(sc2)*(h0+h1) - dmin*float32(m2)*xs[2*j+1]
		}
	}
	return s
}

func dotQ6_KRow(row []byte, x []float32) float32 {
	var s float32
	for b := 0; b < len(x)/256; b++ {
		blk := (*[210]byte)(row[210*b:])
		xb := (*[256]float32)(x[256*b:])
		d := f16Table[binary.LittleEndian.Uint16(blk[208:])]
		for n := 0; n < 2; n++ {
			ql := (*[64]byte)(blk[64*n:])
			qh := (*[32]byte)(blk[128+32*n:])
			sc := (*[8]byte)(blk[192+8*n:])
			y := (*[128]float32)(xb[128*n:])
			// acc[k] sums sub-block k of this half: quarter k/2, l/16 = k%2.
			// The bytes are read as 64-bit words, the 6-bit values
			// assembled and converted in registers: the sums of the byte
			// loop, in its order.
			var acc [8]float32
			{
				la0, la1 := binary.LittleEndian.Uint64(ql[0:]), binary.LittleEndian.Uint64(ql[8:])
				lb0, lb1 := binary.LittleEndian.Uint64(ql[32:]), binary.LittleEndian.Uint64(ql[40:])
				hv0, hv1 := binary.LittleEndian.Uint64(qh[0:]), binary.LittleEndian.Uint64(qh[8:])
				var a0, a1, a2, a3 float32
				a0 += q6w(la0&15|hv0<<4&0x30) * y[0]
				a1 += q6w(lb0&15|hv0>>2<<4&0x30) * y[32]
				a2 += q6w(la0>>4&15|hv0>>4<<4&0x30) * y[64]
				a3 += q6w(lb0>>4&15|hv0>>6<<4&0x30) * y[96]
				a0 += q6w(la0>>8&15|hv0>>8<<4&0x30) * y[1]
				a1 += q6w(lb0>>8&15|hv0>>10<<4&0x30) * y[33]
				a2 += q6w(la0>>12&15|hv0>>12<<4&0x30) * y[65]
				a3 += q6w(lb0>>12&15|hv0>>14<<4&0x30) * y[97]
				a0 += q6w(la0>>16&15|hv0>>16<<4&0x30) * y[2]
				a1 += q6w(lb0>>16&15|hv0>>18<<4&0x30) * y[34]
				a2 += q6w(la0>>20&15|hv0>>20<<4&0x30) * y[66]
				a3 += q6w(lb0>>20&15|hv0>>22<<4&0x30) * y[98]
				a0 += q6w(la0>>24&15|hv0>>24<<4&0x30) * y[3]
				a1 += q6w(lb0>>24&15|hv0>>26<<4&0x30) * y[35]
				a2 += q6w(la0>>28&15|hv0>>28<<4&0x30) * y[67]
				a3 += q6w(lb0>>28&15|hv0>>30<<4&0x30) * y[99]
				a0 += q6w(la0>>32&15|hv0>>32<<4&0x30) * y[4]
				a1 += q6w(lb0>>32&15|hv0>>34<<4&0x30) * y[36]
				a2 += q6w(la0>>36&15|hv0>>36<<4&0x30) * y[68]
				a3 += q6w(lb0>>36&15|hv0>>38<<4&0x30) * y[100]
				a0 += q6w(la0>>40&15|hv0>>40<<4&0x30) * y[5]
				a1 += q6w(lb0>>40&15|hv0>>42<<4&0x30) * y[37]
				a2 += q6w(la0>>44&15|hv0>>44<<4&0x30) * y[69]
				a3 += q6w(lb0>>44&15|hv0>>46<<4&0x30) * y[101]
				a0 += q6w(la0>>48&15|hv0>>48<<4&0x30) * y[6]
				a1 += q6w(lb0>>48&15|hv0>>50<<4&0x30) * y[38]
				a2 += q6w(la0>>52&15|hv0>>52<<4&0x30) * y[70]
				a3 += q6w(lb0>>52&15|hv0>>54<<4&0x30) * y[102]
				a0 += q6w(la0>>56&15|hv0>>56<<4&0x30) * y[7]
				a1 += q6w(lb0>>56&15|hv0>>58<<4&0x30) * y[39]
				a2 += q6w(la0>>60&15|hv0>>60<<4&0x30) * y[71]
				a3 += q6w(lb0>>60&15|hv0>>62<<4&0x30) * y[103]
				a0 += q6w(la1&15|hv1<<4&0x30) * y[8]
				a1 += q6w(lb1&15|hv1>>2<<4&0x30) * y[40]
				a2 += q6w(la1>>4&15|hv1>>4<<4&0x30) * y[72]
				a3 += q6w(lb1>>4&15|hv1>>6<<4&0x30) * y[104]
				a0 += q6w(la1>>8&15|hv1>>8<<4&0x30) * y[9]
				a1 += q6w(lb1>>8&15|hv1>>10<<4&0x30) * y[41]
				a2 += q6w(la1>>12&15|hv1>>12<<4&0x30) * y[73]
				a3 += q6w(lb1>>12&15|hv1>>14<<4&0x30) * y[105]
				a0 += q6w(la1>>16&15|hv1>>16<<4&0x30) * y[10]
				a1 += q6w(lb1>>16&15|hv1>>18<<4&0x30) * y[42]
				a2 += q6w(la1>>20&15|hv1>>20<<4&0x30) * y[74]
				a3 += q6w(lb1>>20&15|hv1>>22<<4&0x30) * y[106]
				a0 += q6w(la1>>24&15|hv1>>24<<4&0x30) * y[11]
				a1 += q6w(lb1>>24&15|hv1>>26<<4&0x30) * y[43]
				a2 += q6w(la1>>28&15|hv1>>28<<4&0x30) * y[75]
				a3 += q6w(lb1>>28&15|hv1>>30<<4&0x30) * y[107]
				a0 += q6w(la1>>32&15|hv1>>32<<4&0x30) * y[12]
				a1 += q6w(lb1>>32&15|hv1>>34<<4&0x30) * y[44]
				a2 += q6w(la1>>36&15|hv1>>36<<4&0x30) * y[76]
				a3 += q6w(lb1>>36&15|hv1>>38<<4&0x30) * y[108]
				a0 += q6w(la1>>40&15|hv1>>40<<4&0x30) * y[13]
				a1 += q6w(lb1>>40&15|hv1>>42<<4&0x30) * y[45]
				a2 += q6w(la1>>44&15|hv1>>44<<4&0x30) * y[77]
				a3 += q6w(lb1>>44&15|hv1>>46<<4&0x30) * y[109]
				a0 += q6w(la1>>48&15|hv1>>48<<4&0x30) * y[14]
				a1 += q6w(lb1>>48&15|hv1>>50<<4&0x30) * y[46]
				a2 += q6w(la1>>52&15|hv1>>52<<4&0x30) * y[78]
				a3 += q6w(lb1>>52&15|hv1>>54<<4&0x30) * y[110]
				a0 += q6w(la1>>56&15|hv1>>56<<4&0x30) * y[15]
				a1 += q6w(lb1>>56&15|hv1>>58<<4&0x30) * y[47]
				a2 += q6w(la1>>60&15|hv1>>60<<4&0x30) * y[79]
				a3 += q6w(lb1>>60&15|hv1>>62<<4&0x30) * y[111]
				acc[0], acc[0+2], acc[0+4], acc[0+6] = a0, a1, a2, a3
			}
			{
				la0, la1 := binary.LittleEndian.Uint64(ql[16:]), binary.LittleEndian.Uint64(ql[24:])
				lb0, lb1 := binary.LittleEndian.Uint64(ql[48:]), binary.LittleEndian.Uint64(ql[56:])
				hv0, hv1 := binary.LittleEndian.Uint64(qh[16:]), binary.LittleEndian.Uint64(qh[24:])
				var a0, a1, a2, a3 float32
				a0 += q6w(la0&15|hv0<<4&0x30) * y[16]
				a1 += q6w(lb0&15|hv0>>2<<4&0x30) * y[48]
				a2 += q6w(la0>>4&15|hv0>>4<<4&0x30) * y[80]
				a3 += q6w(lb0>>4&15|hv0>>6<<4&0x30) * y[112]
				a0 += q6w(la0>>8&15|hv0>>8<<4&0x30) * y[17]
				a1 += q6w(lb0>>8&15|hv0>>10<<4&0x30) * y[49]
				a2 += q6w(la0>>12&15|hv0>>12<<4&0x30) * y[81]
				a3 += q6w(lb0>>12&15|hv0>>14<<4&0x30) * y[113]
				a0 += q6w(la0>>16&15|hv0>>16<<4&0x30) * y[18]
				a1 += q6w(lb0>>16&15|hv0>>18<<4&0x30) * y[50]
				a2 += q6w(la0>>20&15|hv0>>20<<4&0x30) * y[82]
				a3 += q6w(lb0>>20&15|hv0>>22<<4&0x30) * y[114]
				a0 += q6w(la0>>24&15|hv0>>24<<4&0x30) * y[19]
				a1 += q6w(lb0>>24&15|hv0>>26<<4&0x30) * y[51]
				a2 += q6w(la0>>28&15|hv0>>28<<4&0x30) * y[83]
				a3 += q6w(lb0>>28&15|hv0>>30<<4&0x30) * y[115]
				a0 += q6w(la0>>32&15|hv0>>32<<4&0x30) * y[20]
				a1 += q6w(lb0>>32&15|hv0>>34<<4&0x30) * y[52]
				a2 += q6w(la0>>36&15|hv0>>36<<4&0x30) * y[84]
				a3 += q6w(lb0>>36&15|hv0>>38<<4&0x30) * y[116]
				a0 += q6w(la0>>40&15|hv0>>40<<4&0x30) * y[21]
				a1 += q6w(lb0>>40&15|hv0>>42<<4&0x30) * y[53]
				a2 += q6w(la0>>44&15|hv0>>44<<4&0x30) * y[85]
				a3 += q6w(lb0>>44&15|hv0>>46<<4&0x30) * y[117]
				a0 += q6w(la0>>48&15|hv0>>48<<4&0x30) * y[22]
				a1 += q6w(lb0>>48&15|hv0>>50<<4&0x30) * y[54]
				a2 += q6w(la0>>52&15|hv0>>52<<4&0x30) * y[86]
				a3 += q6w(lb0>>52&15|hv0>>54<<4&0x30) * y[118]
				a0 += q6w(la0>>56&15|hv0>>56<<4&0x30) * y[23]
				a1 += q6w(lb0>>56&15|hv0>>58<<4&0x30) * y[55]
				a2 += q6w(la0>>60&15|hv0>>60<<4&0x30) * y[87]
				a3 += q6w(lb0>>60&15|hv0>>62<<4&0x30) * y[119]
				a0 += q6w(la1&15|hv1<<4&0x30) * y[24]
				a1 += q6w(lb1&15|hv1>>2<<4&0x30) * y[56]
				a2 += q6w(la1>>4&15|hv1>>4<<4&0x30) * y[88]
				a3 += q6w(lb1>>4&15|hv1>>6<<4&0x30) * y[120]
				a0 += q6w(la1>>8&15|hv1>>8<<4&0x30) * y[25]
				a1 += q6w(lb1>>8&15|hv1>>10<<4&0x30) * y[57]
				a2 += q6w(la1>>12&15|hv1>>12<<4&0x30) * y[89]
				a3 += q6w(lb1>>12&15|hv1>>14<<4&0x30) * y[121]
				a0 += q6w(la1>>16&15|hv1>>16<<4&0x30) * y[26]
				a1 += q6w(lb1>>16&15|hv1>>18<<4&0x30) * y[58]
				a2 += q6w(la1>>20&15|hv1>>20<<4&0x30) * y[90]
				a3 += q6w(lb1>>20&15|hv1>>22<<4&0x30) * y[122]
				a0 += q6w(la1>>24&15|hv1>>24<<4&0x30) * y[27]
				a1 += q6w(lb1>>24&15|hv1>>26<<4&0x30) * y[59]
				a2 += q6w(la1>>28&15|hv1>>28<<4&0x30) * y[91]
				a3 += q6w(lb1>>28&15|hv1>>30<<4&0x30) * y[123]
				a0 += q6w(la1>>32&15|hv1>>32<<4&0x30) * y[28]
				a1 += q6w(lb1>>32&15|hv1>>34<<4&0x30) * y[60]
				a2 += q6w(la1>>36&15|hv1>>36<<4&0x30) * y[92]
				a3 += q6w(lb1>>36&15|hv1>>38<<4&0x30) * y[124]
				a0 += q6w(la1>>40&15|hv1>>40<<4&0x30) * y[29]
				a1 += q6w(lb1>>40&15|hv1>>42<<4&0x30) * y[61]
				a2 += q6w(la1>>44&15|hv1>>44<<4&0x30) * y[93]
				a3 += q6w(lb1>>44&15|hv1>>46<<4&0x30) * y[125]
				a0 += q6w(la1>>48&15|hv1>>48<<4&0x30) * y[30]
				a1 += q6w(lb1>>48&15|hv1>>50<<4&0x30) * y[62]
				a2 += q6w(la1>>52&15|hv1>>52<<4&0x30) * y[94]
				a3 += q6w(lb1>>52&15|hv1>>54<<4&0x30) * y[126]
				a0 += q6w(la1>>56&15|hv1>>56<<4&0x30) * y[31]
				a1 += q6w(lb1>>56&15|hv1>>58<<4&0x30) * y[63]
				a2 += q6w(la1>>60&15|hv1>>60<<4&0x30) * y[95]
				a3 += q6w(lb1>>60&15|hv1>>62<<4&0x30) * y[127]
				acc[1], acc[1+2], acc[1+4], acc[1+6] = a0, a1, a2, a3
			}
			for k := range 8 {
				s += d * float32(int8(sc[k])) * acc[k]
			}
		}
	}
	return s
}

// q6w is the q6_K weight of the 6-bit value v (v - 32).
func q6w(v uint64) float32 { return float32(int32(v) - 32) }

// Matrix-matrix product, reference version: weight rows are decoded to
// float32 a group at a time, then dotted with every token.

const mmGroup = 8 // weight rows decoded together

var scratchPool sync.Pool

func getScratch(n int) *[]float32 {
	if p, ok := scratchPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

var matmulImpl = matmulGeneric

func matmul(y []float32, c tensor.Codec, data []byte, rb, rows, cols int, x []float32, n int) {
	if cols == 0 {
		clear(y[:n*rows])
		return
	}
	matmulImpl(y, c, data, rb, rows, cols, x, n)
}

func matmulGeneric(y []float32, c tensor.Codec, data []byte, rb, rows, cols int, x []float32, n int) {
	groups := (rows + mmGroup - 1) / mmGroup
	// float32 weights are used in place when aligned.
	var direct []float32
	if c == tensor.F32 {
		direct, _ = f32View(data)
	}
	// At least ~64K multiply-adds per chunk, so tiny products (MoE experts
	// with a token or two) run inline.
	grain := max(1, (64<<10)/max(1, mmGroup*cols*n))
	parallelFor(groups, grain, func(lo, hi int) {
		sp := getScratch(mmGroup * cols)
		defer scratchPool.Put(sp)
		w := *sp
		for g := lo; g < hi; g++ {
			r0 := g * mmGroup
			nr := min(mmGroup, rows-r0)
			if direct != nil {
				matmulTile(y, direct[r0*cols:(r0+nr)*cols], cols, x, n, rows, r0, nr)
				continue
			}
			for i := range nr {
				decodeRow(w[i*cols:(i+1)*cols], c, data[(r0+i)*rb:(r0+i+1)*rb])
			}
			matmulTile(y, w[:nr*cols], cols, x, n, rows, r0, nr)
		}
	})
}

func decodeRow(dst []float32, c tensor.Codec, row []byte) {
	decoders[c](dst, row)
}

func dequantizeRow(c tensor.Codec) func(dst []float32, row []byte) {
	return func(dst []float32, row []byte) {
		if err := tensor.Dequantize(dst, c, row); err != nil {
			panic("kernel: " + err.Error())
		}
	}
}

var genericDecoders = [tensor.NumCodecs]func(dst []float32, row []byte){
	tensor.F32:  dequantizeRow(tensor.F32),
	tensor.F16:  dequantizeRow(tensor.F16),
	tensor.BF16: dequantizeRow(tensor.BF16),
	tensor.Q8_0: dequantizeRow(tensor.Q8_0),
	tensor.Q4_0: dequantizeRow(tensor.Q4_0),
	tensor.Q4_K: dequantizeRow(tensor.Q4_K),
	tensor.Q6_K: dequantizeRow(tensor.Q6_K),
}

// decoders is the row decoder dispatch table used by MatMul.
var decoders = genericDecoders

// matmulTileGeneric: y[t*rows+r0+i] = w[i] · x[t] for nr decoded rows.
func matmulTileGeneric(y, w []float32, cols int, x []float32, n, rows, r0, nr int) {
	for t := range n {
		xt := x[t*cols : (t+1)*cols]
		for i := range nr {
			y[t*rows+r0+i] = Dot(w[i*cols:(i+1)*cols], xt)
		}
	}
}

var matmulTile = matmulTileGeneric

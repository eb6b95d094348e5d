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
	for b := 0; b < len(x)/32; b++ {
		blk := (*[34]byte)(row[34*b:])
		xb := (*[32]float32)(x[32*b:])
		q := (*[32]byte)(blk[2:])
		var s0, s1, s2, s3 float32
		for i := 0; i < 32; i += 4 {
			s0 += i8Table[q[i]] * xb[i]
			s1 += i8Table[q[i+1]] * xb[i+1]
			s2 += i8Table[q[i+2]] * xb[i+2]
			s3 += i8Table[q[i+3]] * xb[i+3]
		}
		s += f16Table[binary.LittleEndian.Uint16(blk[:])] * ((s0 + s1) + (s2 + s3))
	}
	return s
}

func dotQ4_0Row(row []byte, x []float32) float32 {
	var s float32
	for b := 0; b < len(x)/32; b++ {
		blk := (*[18]byte)(row[18*b:])
		xb := (*[32]float32)(x[32*b:])
		q := (*[16]byte)(blk[2:])
		var s0, s1, s2, s3 float32
		for i := 0; i < 16; i += 2 {
			q0, q1 := q[i], q[i+1]
			s0 += q4Table[q0&0xf] * xb[i]
			s1 += q4Table[q0>>4] * xb[i+16]
			s2 += q4Table[q1&0xf] * xb[i+1]
			s3 += q4Table[q1>>4] * xb[i+17]
		}
		s += f16Table[binary.LittleEndian.Uint16(blk[:])] * ((s0 + s1) + (s2 + s3))
	}
	return s
}

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
			// The 32 bytes as four 64-bit words, one trip for the
			// sub-block: the sums of the byte loop, in its order.
			v0, v1 := binary.LittleEndian.Uint64(q[0:]), binary.LittleEndian.Uint64(q[8:])
			v2, v3 := binary.LittleEndian.Uint64(q[16:]), binary.LittleEndian.Uint64(q[24:])
			var l0, l1, h0, h1 float32
			l0 += u4Table[v0&15] * xl[0]
			h0 += u4Table[v0>>4&15] * xh[0]
			l1 += u4Table[v0>>8&15] * xl[1]
			h1 += u4Table[v0>>12&15] * xh[1]
			l0 += u4Table[v0>>16&15] * xl[2]
			h0 += u4Table[v0>>20&15] * xh[2]
			l1 += u4Table[v0>>24&15] * xl[3]
			h1 += u4Table[v0>>28&15] * xh[3]
			l0 += u4Table[v0>>32&15] * xl[4]
			h0 += u4Table[v0>>36&15] * xh[4]
			l1 += u4Table[v0>>40&15] * xl[5]
			h1 += u4Table[v0>>44&15] * xh[5]
			l0 += u4Table[v0>>48&15] * xl[6]
			h0 += u4Table[v0>>52&15] * xh[6]
			l1 += u4Table[v0>>56&15] * xl[7]
			h1 += u4Table[v0>>60&15] * xh[7]
			l0 += u4Table[v1&15] * xl[8]
			h0 += u4Table[v1>>4&15] * xh[8]
			l1 += u4Table[v1>>8&15] * xl[9]
			h1 += u4Table[v1>>12&15] * xh[9]
			l0 += u4Table[v1>>16&15] * xl[10]
			h0 += u4Table[v1>>20&15] * xh[10]
			l1 += u4Table[v1>>24&15] * xl[11]
			h1 += u4Table[v1>>28&15] * xh[11]
			l0 += u4Table[v1>>32&15] * xl[12]
			h0 += u4Table[v1>>36&15] * xh[12]
			l1 += u4Table[v1>>40&15] * xl[13]
			h1 += u4Table[v1>>44&15] * xh[13]
			l0 += u4Table[v1>>48&15] * xl[14]
			h0 += u4Table[v1>>52&15] * xh[14]
			l1 += u4Table[v1>>56&15] * xl[15]
			h1 += u4Table[v1>>60&15] * xh[15]
			l0 += u4Table[v2&15] * xl[16]
			h0 += u4Table[v2>>4&15] * xh[16]
			l1 += u4Table[v2>>8&15] * xl[17]
			h1 += u4Table[v2>>12&15] * xh[17]
			l0 += u4Table[v2>>16&15] * xl[18]
			h0 += u4Table[v2>>20&15] * xh[18]
			l1 += u4Table[v2>>24&15] * xl[19]
			h1 += u4Table[v2>>28&15] * xh[19]
			l0 += u4Table[v2>>32&15] * xl[20]
			h0 += u4Table[v2>>36&15] * xh[20]
			l1 += u4Table[v2>>40&15] * xl[21]
			h1 += u4Table[v2>>44&15] * xh[21]
			l0 += u4Table[v2>>48&15] * xl[22]
			h0 += u4Table[v2>>52&15] * xh[22]
			l1 += u4Table[v2>>56&15] * xl[23]
			h1 += u4Table[v2>>60&15] * xh[23]
			l0 += u4Table[v3&15] * xl[24]
			h0 += u4Table[v3>>4&15] * xh[24]
			l1 += u4Table[v3>>8&15] * xl[25]
			h1 += u4Table[v3>>12&15] * xh[25]
			l0 += u4Table[v3>>16&15] * xl[26]
			h0 += u4Table[v3>>20&15] * xh[26]
			l1 += u4Table[v3>>24&15] * xl[27]
			h1 += u4Table[v3>>28&15] * xh[27]
			l0 += u4Table[v3>>32&15] * xl[28]
			h0 += u4Table[v3>>36&15] * xh[28]
			l1 += u4Table[v3>>40&15] * xl[29]
			h1 += u4Table[v3>>44&15] * xh[29]
			l0 += u4Table[v3>>48&15] * xl[30]
			h0 += u4Table[v3>>52&15] * xh[30]
			l1 += u4Table[v3>>56&15] * xl[31]
			h1 += u4Table[v3>>60&15] * xh[31]
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
			var acc [8]float32
			for h := 0; h < 2; h++ {
				var a0, a1, a2, a3 float32
				for l := 16 * h; l < 16*h+16; l++ {
					hb := qh[l]
					a0 += q6Table[ql[l]&0xf|(hb&3)<<4] * y[l]
					a1 += q6Table[ql[l+32]&0xf|(hb>>2&3)<<4] * y[l+32]
					a2 += q6Table[ql[l]>>4|(hb>>4&3)<<4] * y[l+64]
					a3 += q6Table[ql[l+32]>>4|(hb>>6)<<4] * y[l+96]
				}
				acc[h], acc[h+2], acc[h+4], acc[h+6] = a0, a1, a2, a3
			}
			for k := range 8 {
				s += d * float32(int8(sc[k])) * acc[k]
			}
		}
	}
	return s
}

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

//go:build arm64 && !purego

package kernel

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"

	"github.com/cortiq/cortiq/tensor"
)

// arm64 kernels (dot_arm64.s). Level NEON (Advanced SIMD, on every arm64
// CPU): Exact f32, f16, bf16, q4_K and q6_K dots, MatMul's 4×2 f32 tile
// and its q8_0 and q4_0 row decoders, and Int8 q8_0, q4_0, q4_K and q6_K
// dots (decode and prefill) with widening multiplies. Level NEONDot: the
// same with the dot-product extension's SDOT in the Int8 dots.

//go:noescape
func dotF32NEON(a, b *float32, n int) float32

//go:noescape
func dotQ8_0Q8SDOT(w *byte, xq *int8, xd *float32, nb int, tab *float32) float32

//go:noescape
func dotQ8_0Q8NEON(w *byte, xq *int8, xd *float32, nb int, tab *float32) float32

//go:noescape
func dotQ4_0Q8SDOT(w *byte, xq *int8, xd, xs *float32, nb int, tab *float32) float32

//go:noescape
func dotQ4_0Q8NEON(w *byte, xq *int8, xd, xs *float32, nb int, tab *float32) float32

//go:noescape
func dotF16NEON(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16NEON(w *byte, x *float32, n int) float32

//go:noescape
func decodeQ8_0NEON(dst *float32, w *byte, nb int, tab *float32)

//go:noescape
func decodeQ4_0NEON(dst *float32, w *byte, nb int, tab *float32)

//go:noescape
func gemm4x2NEON(w *float32, ldw int, x *float32, ldx int, n int, out *[8]float32)

//go:noescape
func dotQ4_KSubNEON(w *byte, x *float32, nb int, out *float32)

//go:noescape
func dotQ6_KSubNEON(w *byte, x *float32, nb int, out *float32)

//go:noescape
func q4KQ8SubSDOT(w *byte, xq *int8, nb int, out *int32)

//go:noescape
func q4KQ8SubNEON(w *byte, xq *int8, nb int, out *int32)

//go:noescape
func q6KQ8SubSDOT(w *byte, xq *int8, nb int, out *int32)

//go:noescape
func q6KQ8SubNEON(w *byte, xq *int8, nb int, out *int32)

const hasAVX2 = false

var (
	hasDotProd = cpu.ARM64.HasASIMDDP

	detected = func() Level {
		if hasDotProd {
			return NEONDot
		}
		return NEON
	}()
)

var archLevels = []Level{Generic, NEON, NEONDot}

// applyLevel installs the kernels of level l (l <= detected).
func applyLevel(l Level) {
	level = l
	dotImpl = dotGeneric
	matvecKernels = genericKernels
	decoders = genericDecoders
	matmulTile = matmulTileGeneric
	int8Kernels = [len(int8Kernels)]int8Kernel{}
	int8MatMul = nil
	if l < NEON {
		return
	}
	dotImpl = dotNEON
	matmulTile = matmulTileNEON
	matvecKernels[tensor.Q6_K] = genericRows(dotQ6_KRowNEON)
	matvecKernels[tensor.Q4_K] = func(y []float32, data []byte, rb int, x, xsum []float32) {
		for i := range y {
			y[i] = dotQ4_KRowNEON(data[i*rb:(i+1)*rb], x, xsum)
		}
	}
	matvecKernels[tensor.F16] = genericRows(func(row []byte, x []float32) float32 {
		return dot16NEON(row, x, dotF16NEON, dotF16Row)
	})
	matvecKernels[tensor.BF16] = genericRows(func(row []byte, x []float32) float32 {
		return dot16NEON(row, x, dotBF16NEON, dotBF16Row)
	})
	decoders[tensor.Q8_0] = func(dst []float32, row []byte) {
		if len(dst) > 0 {
			decodeQ8_0NEON(&dst[0], &row[0], len(dst)/32, &f16Table[0])
		}
	}
	decoders[tensor.Q4_0] = func(dst []float32, row []byte) {
		if len(dst) > 0 {
			decodeQ4_0NEON(&dst[0], &row[0], len(dst)/32, &f16Table[0])
		}
	}
	q8, q4 := dotQ8_0Q8NEON, dotQ4_0Q8NEON
	if l >= NEONDot {
		q8, q4 = dotQ8_0Q8SDOT, dotQ4_0Q8SDOT
	}
	// Callers pass at least one block (prepareMatVec takes the Int8 path
	// only for cols > 0, and cols is a multiple of 32).
	int8Kernels[tensor.Q8_0] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = q8(&data[i*rb], &qx.q[0], &qx.d[0], len(qx.d), &f16Table[0])
		}
	}
	int8Kernels[tensor.Q4_0] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = q4(&data[i*rb], &qx.q[0], &qx.d[0], &qx.s[0], len(qx.d), &f16Table[0])
		}
	}
	q4k, q6k := q4KQ8SubNEON, q6KQ8SubNEON
	if l >= NEONDot {
		q4k, q6k = q4KQ8SubSDOT, q6KQ8SubSDOT
	}
	int8Kernels[tensor.Q6_K] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = dotQ6_KInt8(data[i*rb:(i+1)*rb], qx, q6k)
		}
	}
	int8Kernels[tensor.Q4_K] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = dotQ4_KInt8(data[i*rb:(i+1)*rb], qx, q4k)
		}
	}
	int8MatMul = matmulInt8NEON
}

// matmulInt8NEON is Int8-mode MatMul of the codecs with an Int8 MatVec
// kernel (q8_0, q4_0, q4_K, q6_K): every
// token row quantized as MatVec quantizes it and dotted with the Int8
// MatVec kernel, so each token's outputs equal its MatVec's bit for bit;
// groups of 16 weight rows meet all the tokens while they are in cache.
func matmulInt8NEON(y []float32, w *tensor.Tensor, x []float32, n, rows, cols, rb int) bool {
	k := int8Kernels[w.Codec]
	if k == nil || cols%32 != 0 || cols == 0 || rows == 0 {
		return false
	}
	var buf [64]*q8x
	qs := buf[:0]
	if n > len(buf) {
		qs = make([]*q8x, 0, n)
	}
	qs = qs[:n]
	parallelFor(n, max(1, (16<<10)/cols), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			qs[t] = quantizeX(x[t*cols : (t+1)*cols])
		}
	})
	const group = 16
	parallelFor((rows+group-1)/group, max(1, (32<<10)/(group*rb)), func(lo, hi int) {
		for g := lo; g < hi; g++ {
			r0 := g * group
			nr := min(group, rows-r0)
			data := w.Data[r0*rb : (r0+nr)*rb]
			for t, qx := range qs {
				k(y[t*rows+r0:t*rows+r0+nr], data, rb, qx)
			}
		}
	})
	for _, qx := range qs {
		putQ8x(qx)
	}
	return true
}

// dotQ4_KInt8 is the Int8 q4_K row dot: the integer sub-block sums from
// sub (assembly), a chunk of super-blocks at a time, then per sub-block
// d·sc·(dx·Σq·xq) − dmin·m·(dx·Σxq), dx the activation block's scale.
func dotQ4_KInt8(row []byte, qx *q8x, sub func(w *byte, xq *int8, nb int, out *int32)) float32 {
	const chunk = 16
	var is [8 * chunk]int32
	var s float32
	nb := len(qx.d) / 8
	for b0 := 0; b0 < nb; b0 += chunk {
		n := min(chunk, nb-b0)
		_ = row[144*(b0+n)-1]
		_ = qx.q[256*(b0+n)-1]
		sub(&row[144*b0], &qx.q[256*b0], n, &is[0])
		for b := range n {
			blk := (*[144]byte)(row[144*(b0+b):])
			d := f16Table[binary.LittleEndian.Uint16(blk[0:])]
			dmin := f16Table[binary.LittleEndian.Uint16(blk[2:])]
			xd := (*[8]float32)(qx.d[8*(b0+b):])
			xs := (*[8]float32)(qx.s[8*(b0+b):])
			for k := range 8 {
				sc, m := tensor.Q4KScaleMin(k, blk[4:16])
				s += d*float32(sc)*(xd[k]*float32(is[8*b+k])) - dmin*float32(m)*xs[k]
			}
		}
	}
	return s
}

// dotQ6_KInt8 is the Int8 q6_K row dot: the integer sub-block sums from
// sub (assembly), a chunk of super-blocks at a time, then per sub-block
// d·sc·(dx·Σq·xq), dx the scale of the activation block holding it.
func dotQ6_KInt8(row []byte, qx *q8x, sub func(w *byte, xq *int8, nb int, out *int32)) float32 {
	const chunk = 8
	var is [16 * chunk]int32
	var s float32
	nb := len(qx.d) / 8
	for b0 := 0; b0 < nb; b0 += chunk {
		n := min(chunk, nb-b0)
		_ = row[210*(b0+n)-1]
		_ = qx.q[256*(b0+n)-1]
		sub(&row[210*b0], &qx.q[256*b0], n, &is[0])
		for b := range n {
			blk := (*[210]byte)(row[210*(b0+b):])
			d := f16Table[binary.LittleEndian.Uint16(blk[208:])]
			xd := (*[8]float32)(qx.d[8*(b0+b):])
			for k := range 16 {
				s += d * float32(int8(blk[192+k])) * (xd[k/2] * float32(is[16*b+k]))
			}
		}
	}
	return s
}

// dotNEON is Dot with sixteen partial sums over the first len(a)&^15
// elements, the rest added one by one.
func dotNEON(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	n16 := n &^ 15
	var s float32
	if n16 > 0 {
		s = dotF32NEON(&a[0], &b[0], n16)
	}
	for i := n16; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// dot16NEON dots a row of 16-bit floats with x: the first len(x)&^15
// elements with the NEON kernel k, the rest with the portable row dot.
func dot16NEON(row []byte, x []float32, k func(w *byte, x *float32, n int) float32, rest func([]byte, []float32) float32) float32 {
	n16 := len(x) &^ 15
	var s float32
	if n16 > 0 {
		s = k(&row[0], &x[0], n16)
	}
	if n16 < len(x) {
		s += rest(row[2*n16:], x[n16:])
	}
	return s
}

// matmulTileNEON runs the 4-row × 2-token register tile over the decoded
// rows; leftovers go through the dot kernel.
func matmulTileNEON(y, w []float32, cols int, x []float32, n, rows, r0, nr int) {
	if cols%4 != 0 || cols == 0 {
		matmulTileGeneric(y, w, cols, x, n, rows, r0, nr)
		return
	}
	var out [8]float32
	nr4 := nr &^ 3
	for t := 0; t < n; t += 2 {
		t1 := min(t+1, n-1)
		x0 := x[t*cols : (t+1)*cols]
		_ = x[t1*cols : (t1+1)*cols]
		for i := 0; i < nr4; i += 4 {
			_ = w[(i+3)*cols : (i+4)*cols]
			gemm4x2NEON(&w[i*cols], cols, &x0[0], (t1-t)*cols, cols, &out)
			yt := y[t*rows+r0+i : t*rows+r0+i+4]
			yt[0], yt[1], yt[2], yt[3] = out[0], out[2], out[4], out[6]
			if t1 != t {
				yt := y[t1*rows+r0+i : t1*rows+r0+i+4]
				yt[0], yt[1], yt[2], yt[3] = out[1], out[3], out[5], out[7]
			}
		}
		for i := nr4; i < nr; i++ {
			wi := w[i*cols : (i+1)*cols]
			y[t*rows+r0+i] = dotNEON(wi, x0)
			if t1 != t {
				y[t1*rows+r0+i] = dotNEON(wi, x[t1*cols:(t1+1)*cols])
			}
		}
	}
}

// dotQ4_KRowNEON is dotQ4_KRowSums with the sub-block dots from
// dotQ4_KSubNEON, a chunk of super-blocks at a time.
func dotQ4_KRowNEON(row []byte, x, xsum []float32) float32 {
	const chunk = 16
	var sub [8 * chunk]float32
	var s float32
	nb := len(x) / 256
	for b0 := 0; b0 < nb; b0 += chunk {
		n := min(chunk, nb-b0)
		_ = row[144*(b0+n)-1]
		_ = x[256*(b0+n)-1]
		dotQ4_KSubNEON(&row[144*b0], &x[256*b0], n, &sub[0])
		for b := range n {
			blk := (*[144]byte)(row[144*(b0+b):])
			xs := (*[8]float32)(xsum[8*(b0+b):])
			ds := (*[8]float32)(sub[8*b:])
			d := f16Table[binary.LittleEndian.Uint16(blk[0:])]
			dmin := f16Table[binary.LittleEndian.Uint16(blk[2:])]
			scales := blk[4:16]
			for j := 0; j < 4; j++ {
				sc1, m1 := tensor.Q4KScaleMin(2*j, scales)
				sc2, m2 := tensor.Q4KScaleMin(2*j+1, scales)
				s += d*float32(sc1)*ds[2*j] - dmin*float32(m1)*xs[2*j]
				s += d*float32(sc2)*ds[2*j+1] - dmin*float32(m2)*xs[2*j+1]
			}
		}
	}
	return s
}

// dotQ6_KRowNEON is dotQ6_KRow with the sub-block dots from
// dotQ6_KSubNEON, a chunk of super-blocks at a time.
func dotQ6_KRowNEON(row []byte, x []float32) float32 {
	const chunk = 8
	var sub [16 * chunk]float32
	var s float32
	nb := len(x) / 256
	for b0 := 0; b0 < nb; b0 += chunk {
		n := min(chunk, nb-b0)
		_ = row[210*(b0+n)-1]
		_ = x[256*(b0+n)-1]
		dotQ6_KSubNEON(&row[210*b0], &x[256*b0], n, &sub[0])
		for b := range n {
			blk := (*[210]byte)(row[210*(b0+b):])
			acc := (*[16]float32)(sub[16*b:])
			d := f16Table[binary.LittleEndian.Uint16(blk[208:])]
			for k := range 16 {
				s += d * float32(int8(blk[192+k])) * acc[k]
			}
		}
	}
	return s
}

func simdLen(int) int { return 0 }

func dotRowsSIMD(dst, q, k []float32, stride int) bool { return false }
func axpyRowsSIMD(dst, a, x []float32, stride int) int { return 0 }
func allFiniteSIMD(x *float32, n int) bool             { return true }

func axpySIMD(dst, x *float32, a float32, n int) {}
func addSIMD(dst, a *float32, n int)             {}
func mulSIMD(dst, a *float32, n int)             {}
func scaleSIMD(x *float32, s float32, n int)     {}

func runPacked(*matvec, int, int) { panic("kernel: no packed kernels in this build") }

func matmulsInt8([]float32, int, []Product) bool { return false }

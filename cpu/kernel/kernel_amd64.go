//go:build amd64 && !purego

package kernel

import (
	"golang.org/x/sys/cpu"

	"github.com/cortiq/cortiq/tensor"
)

// AVX2 kernels (kernel_amd64.s). They compute the same float32 products
// as the portable loops, with 8-lane partial sums.

//go:noescape
func readSumAVX2(p *byte, n int) uint64

//go:noescape
func dotF32AVX2(w, x *float32, n int) float32

//go:noescape
func dotF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotQ8_0AVX2(w *byte, x *float32, nb int) float32

//go:noescape
func dotQ4_0AVX2(w *byte, x *float32, negxsum *float32, nb int) float32

//go:noescape
func dotQ6_KAVX2(w *byte, x *float32, nb int) float32

//go:noescape
func dotQ4_KAVX2(w *byte, x *float32, xsum *float32, nb int) float32

//go:noescape
func gemm4x2AVX2(w *float32, ldw int, x *float32, ldx int, n int, out *[8]float32)

//go:noescape
func decodeQ4_0AVX2(dst *float32, w *byte, nb int)

//go:noescape
func decodeQ8_0AVX2(dst *float32, w *byte, nb int)

//go:noescape
func decodeF16AVX2(dst *float32, w *byte, n int)

//go:noescape
func decodeBF16AVX2(dst *float32, w *byte, n int)

//go:noescape
func decodeQ4_KAVX2(dst *float32, w *byte, nb int)

//go:noescape
func decodeQ6_KAVX2(dst *float32, w *byte, nb int)

//go:noescape
func dotQ8_0Q8AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ4_0Q8AVX2(w *byte, xq *int8, xd *float32, xc *int32, nb int) float32

var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL
	hasVNNI   = hasAVX512 && cpu.X86.HasAVX512VNNI

	detected = func() Level {
		switch {
		case hasVNNI && amxUsable():
			return AMX
		case hasVNNI:
			return AVX512VNNI
		case hasAVX512:
			return AVX512
		case hasAVX2:
			return AVX2
		}
		return Generic
	}()
)

// applyLevel installs the kernels of level l (l <= detected).
func applyLevel(l Level) {
	level = l
	useAVX2(l >= AVX2)
	readSumImpl = nil
	if l >= AVX2 {
		readSumImpl = readSumAVX2
		useLowbitInt8(l >= AVX512VNNI)
	}
	int8MatMul, int8MatMuls, packedDecode, quantRowImpl = nil, false, false, nil
	if l >= AVX512 {
		quantRowImpl = quantRow
		siluImpl = siluAVX512Slice
		useAVX512(l >= AVX512VNNI)
	}
	if l >= AVX512VNNI {
		int8MatMul, int8MatMuls, packedDecode = matmulInt8, true, true
	}
}

// useAVX2 switches the dispatch tables between the AVX2 and the portable
// kernels (tests run both).
func useAVX2(on bool) {
	if on && !hasAVX2 {
		return
	}
	useVecAVX2(on)
	if !on {
		matvecKernels = genericKernels
		dotImpl = dotGeneric
		decoders = genericDecoders
		matmulTile = matmulTileGeneric
		matmulImpl = matmulGeneric
		int8Kernels = [len(int8Kernels)]int8Kernel{}
		return
	}
	matvecKernels[tensor.F32] = genericRows(dotF32RowAVX2)
	matvecKernels[tensor.F16] = genericRows(dotF16RowAVX2)
	matvecKernels[tensor.BF16] = genericRows(dotBF16RowAVX2)
	matvecKernels[tensor.Q8_0] = genericRows(func(row []byte, x []float32) float32 {
		if len(x) == 0 {
			return 0
		}
		return dotQ8_0AVX2(&row[0], &x[0], len(x)/32)
	})
	matvecKernels[tensor.Q4_0] = func(y []float32, data []byte, rb int, x, xsum []float32) {
		if len(x) == 0 {
			clear(y)
			return
		}
		for i := range y {
			y[i] = dotQ4_0AVX2(&data[i*rb], &x[0], &xsum[0], len(x)/32)
		}
	}
	matvecKernels[tensor.Q6_K] = genericRows(func(row []byte, x []float32) float32 {
		if len(x) == 0 {
			return 0
		}
		return dotQ6_KAVX2(&row[0], &x[0], len(x)/256)
	})
	matvecKernels[tensor.Q4_K] = func(y []float32, data []byte, rb int, x, xsum []float32) {
		if len(x) == 0 {
			clear(y)
			return
		}
		for i := range y {
			y[i] = dotQ4_KAVX2(&data[i*rb], &x[0], &xsum[0], len(x)/256)
		}
	}
	dotImpl = dotAVX2
	decoders[tensor.Q4_0] = func(dst []float32, row []byte) {
		if len(dst) > 0 {
			decodeQ4_0AVX2(&dst[0], &row[0], len(dst)/32)
		}
	}
	decoders[tensor.Q8_0] = func(dst []float32, row []byte) {
		if len(dst) > 0 {
			decodeQ8_0AVX2(&dst[0], &row[0], len(dst)/32)
		}
	}
	decoders[tensor.F16] = func(dst []float32, row []byte) {
		n8 := len(dst) &^ 7
		if n8 > 0 {
			decodeF16AVX2(&dst[0], &row[0], n8)
		}
		for i := n8; i < len(dst); i++ {
			dst[i] = f16Table[uint16(row[2*i])|uint16(row[2*i+1])<<8]
		}
	}
	decoders[tensor.BF16] = func(dst []float32, row []byte) {
		n8 := len(dst) &^ 7
		if n8 > 0 {
			decodeBF16AVX2(&dst[0], &row[0], n8)
		}
		for i := n8; i < len(dst); i++ {
			dst[i] = tensor.BF16ToF32(uint16(row[2*i]) | uint16(row[2*i+1])<<8)
		}
	}
	decoders[tensor.Q4_K] = func(dst []float32, row []byte) {
		if len(dst) > 0 {
			decodeQ4_KAVX2(&dst[0], &row[0], len(dst)/256)
		}
	}
	decoders[tensor.Q6_K] = func(dst []float32, row []byte) {
		if len(dst) > 0 {
			decodeQ6_KAVX2(&dst[0], &row[0], len(dst)/256)
		}
	}
	matmulTile = matmulTileAVX2
	// One row at a time: a single sequential stream through the weights
	// reads from DRAM faster (measured 7-9 GB/s per core) than kernels
	// that interleave four rows (4-7 GB/s), though those compute faster
	// on cached data; decode is bound by the memory stream.
	int8Kernels[tensor.Q4_0] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = dotQ4_0Q8AVX2(&data[i*rb], &qx.q[0], &qx.d[0], &qx.c[0], len(qx.d))
		}
	}
	int8Kernels[tensor.Q8_0] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = dotQ8_0Q8AVX2(&data[i*rb], &qx.q[0], &qx.d[0], len(qx.d))
		}
	}
	matmulImpl = matmulAVX2
}

func dotAVX2(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	n8 := n &^ 7
	var s float32
	if n8 > 0 {
		s = dotF32AVX2(&a[0], &b[0], n8)
	}
	for i := n8; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

func dotF32RowAVX2(row []byte, x []float32) float32 {
	w, ok := f32View(row)
	if !ok {
		return dotF32Row(row, x)
	}
	return dotAVX2(w, x)
}

func dotF16RowAVX2(row []byte, x []float32) float32 {
	n8 := len(x) &^ 7
	var s float32
	if n8 > 0 {
		s = dotF16AVX2(&row[0], &x[0], n8)
	}
	if n8 < len(x) {
		s += dotF16Row(row[2*n8:], x[n8:])
	}
	return s
}

func dotBF16RowAVX2(row []byte, x []float32) float32 {
	n8 := len(x) &^ 7
	var s float32
	if n8 > 0 {
		s = dotBF16AVX2(&row[0], &x[0], n8)
	}
	if n8 < len(x) {
		s += dotBF16Row(row[2*n8:], x[n8:])
	}
	return s
}

// matmulTileAVX2 runs the 4-row × 2-token register tile over the decoded
// rows; leftovers go through the dot kernel.
func matmulTileAVX2(y, w []float32, cols int, x []float32, n, rows, r0, nr int) {
	if cols%8 != 0 || cols == 0 {
		matmulTileGeneric(y, w, cols, x, n, rows, r0, nr)
		return
	}
	var out [8]float32
	nr4 := nr &^ 3
	for t := 0; t < n; t += 2 {
		t1 := min(t+1, n-1)
		x0 := x[t*cols : (t+1)*cols]
		for i := 0; i < nr4; i += 4 {
			gemm4x2AVX2(&w[i*cols], cols, &x0[0], (t1-t)*cols, cols, &out)
			yt := y[t*rows+r0+i : t*rows+r0+i+4]
			yt[0], yt[1], yt[2], yt[3] = out[0], out[2], out[4], out[6]
			if t1 != t {
				yt := y[t1*rows+r0+i : t1*rows+r0+i+4]
				yt[0], yt[1], yt[2], yt[3] = out[1], out[3], out[5], out[7]
			}
		}
		for i := nr4; i < nr; i++ {
			wi := w[i*cols : (i+1)*cols]
			y[t*rows+r0+i] = dotAVX2(wi, x0)
			if t1 != t {
				y[t1*rows+r0+i] = dotAVX2(wi, x[t1*cols:(t1+1)*cols])
			}
		}
	}
}

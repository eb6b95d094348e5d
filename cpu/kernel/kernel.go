// Package kernel holds the CPU engine's compute kernels: matrix-vector and
// matrix-matrix products over weights in any tensor.Codec, and the small
// vector operations of a transformer forward pass.
//
// Contract. A weight is a tensor.Tensor viewed as a [rows, cols] matrix
// (leading dimensions fold into rows). MatVec computes y[o] = Σ_i W[o,i]·x[i]
// in float32 with the weights decoded exactly as tensor.Dequantize decodes
// them; the only difference from a naive "dequantize, then dot" loop is the
// order of float32 additions (8-lane partial sums; for block codecs the
// block scale multiplies a block's partial sum, and q4_0's -8 offset and
// q4_K's min are applied through Σx). MatMul decodes weight rows to float32
// exactly and accumulates each output in one float32 sum per token. This is
// the Exact mode, the numerical reference other backends compare against,
// and the default. SetMode(Int8) trades it for speed on q8_0/q4_0 MatVec
// (see Int8).
//
// Every output element is computed by one goroutine in an order fixed by
// the call's shapes, so results are bit-for-bit reproducible whatever the
// worker count or scheduling. Different entry points (MatVec versus MatMul,
// MatMul with few versus many tokens) sum in different orders and may
// differ in the last bits.
//
// Implementation. The portable Go kernels (generic.go) are the reference
// and run everywhere (wasm included). On amd64 with AVX2+FMA+F16C, assembly
// kernels replace them at init; build with -tags purego to disable them.
// Kernels run in parallel on runtime.GOMAXPROCS(0) goroutines (read at
// each call; helpers are long-lived and started on demand); small
// products run inline on the caller. Kernels are safe for concurrent use. Length mismatches between
// the tensor and the slices are programming errors and panic.
package kernel

import (
	"fmt"

	"github.com/cortiq/cortiq/tensor"
)

// MatVec computes y = W·x for a weight w of shape [rows, cols]:
// len(x) == cols, len(y) == rows.
func MatVec(y []float32, w *tensor.Tensor, x []float32) {
	MatVecRows(y, w, x, 0, matRows(w))
}

// matRows is the product of the leading dimensions (unlike
// tensor.Tensor.Rows it stays right when the last dimension is 0).
func matRows(w *tensor.Tensor) int {
	r := 1
	for _, d := range w.Shape[:max(0, len(w.Shape)-1)] {
		r *= d
	}
	return r
}

// MatVecRows computes the rows [row0, row0+nrows) of W·x into y[:nrows].
// For a stacked expert bank [E, out, in], expert e is row0 = e*out,
// nrows = out.
func MatVecRows(y []float32, w *tensor.Tensor, x []float32, row0, nrows int) {
	cols := w.Cols()
	rb := checkMat(w, cols, row0, nrows)
	if len(x) != cols || len(y) < nrows {
		panic(fmt.Sprintf("kernel: MatVec %s %v: len(x)=%d len(y)=%d for %d rows of %d", w.Name, w.Shape, len(x), len(y), nrows, cols))
	}
	data := w.Data[row0*rb : (row0+nrows)*rb]
	// Split so that each chunk reads at least ~64 KiB of weights.
	grain := max(1, (64<<10)/max(1, rb))
	if CurrentMode() == Int8 && int(w.Codec) < len(int8Kernels) && int8Kernels[w.Codec] != nil && cols > 0 {
		k8 := int8Kernels[w.Codec]
		qx := quantizeX(x)
		parallelFor(nrows, grain, func(lo, hi int) {
			k8(y[lo:hi], data[lo*rb:hi*rb], rb, qx)
		})
		return
	}
	k := matvecKernel(w.Codec)
	aux := prepareX(w.Codec, x)
	parallelFor(nrows, grain, func(lo, hi int) {
		k(y[lo:hi], data[lo*rb:hi*rb], rb, x, aux)
	})
}

// MatMul computes Y = X·Wᵀ for n activation rows: x[t*cols:(t+1)*cols]
// gives y[t*rows:(t+1)*rows]. Each weight row is decoded once per block
// of tokens, so this is far cheaper per token than n MatVec calls.
func MatMul(y []float32, w *tensor.Tensor, x []float32, n int) {
	rows, cols := matRows(w), w.Cols()
	rb := checkMat(w, cols, 0, rows)
	if n < 0 || len(x) < n*cols || len(y) < n*rows {
		panic(fmt.Sprintf("kernel: MatMul %s %v: len(x)=%d len(y)=%d for %d tokens", w.Name, w.Shape, len(x), len(y), n))
	}
	switch n {
	case 0:
		return
	case 1:
		MatVec(y[:rows], w, x[:cols])
		return
	}
	matmul(y, w.Codec, w.Data[:rows*rb], rb, rows, cols, x, n)
}

func checkMat(w *tensor.Tensor, cols, row0, nrows int) int {
	rb, err := w.Codec.RowBytes(cols)
	if err != nil || !w.Codec.Valid() || w.Codec == tensor.I32 {
		panic(fmt.Sprintf("kernel: weight %s %v: codec %s: %v", w.Name, w.Shape, w.Codec, err))
	}
	rows := matRows(w)
	if row0 < 0 || nrows < 0 || row0+nrows > rows || len(w.Data) < rows*rb {
		panic(fmt.Sprintf("kernel: weight %s %v (%s, %d bytes): rows [%d,%d) out of range", w.Name, w.Shape, w.Codec, len(w.Data), row0, row0+nrows))
	}
	return rb
}

package kernel

import (
	"sync"

	"github.com/cortiq/cortiq/tensor"
)

// The GGUF codecs beyond q8_0/q4_0/q4_K/q6_K (q4_1 … mxfp4) run the exact
// path: each weight row is decoded with tensor.Dequantize (bit-for-bit
// ggml's values) and dotted with x in float32. In Int8 mode, q4_1 … mxfp4
// MatVec runs the SIMD kernels of lowbit_int8.go instead (levels AVX2 and
// up); the IQ2/IQ3/IQ1/TQ types stay exact.

// lowbitCodecs are the codecs served by this file.
var lowbitCodecs = []tensor.Codec{
	tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.Q2_K, tensor.Q3_K, tensor.Q5_K,
	tensor.IQ4_NL, tensor.IQ4_XS, tensor.IQ3_XXS, tensor.IQ3_S,
	tensor.IQ2_XXS, tensor.IQ2_XS, tensor.IQ2_S, tensor.IQ1_S, tensor.IQ1_M,
	tensor.TQ1_0, tensor.TQ2_0, tensor.MXFP4,
}

func init() {
	for _, c := range lowbitCodecs {
		k, d := decodedRows(c), dequantizeRow(c)
		genericKernels[c], matvecKernels[c] = k, k
		genericDecoders[c], decoders[c] = d, d
	}
}

// rowBufs recycles the decoded-row buffers of decodedRows.
var rowBufs sync.Pool

// decodedRows is the exact matvec kernel of codec c: every row decoded to
// float32 (by the level's decoder: tensor.Dequantize, or its SIMD twin
// from lowbit_int8.go), then one float32 dot product with x.
func decodedRows(c tensor.Codec) rowsKernel {
	return func(y []float32, data []byte, rb int, x, _ []float32) {
		n := len(x)
		var w []float32
		if p, ok := rowBufs.Get().(*[]float32); ok && cap(*p) >= n {
			w = (*p)[:n]
		} else {
			w = make([]float32, n)
		}
		for i := range y {
			decodeRow(w, c, data[i*rb:(i+1)*rb])
			y[i] = Dot(w, x)
		}
		rowBufs.Put(&w)
	}
}

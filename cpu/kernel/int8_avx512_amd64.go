//go:build amd64 && !purego

package kernel

import "github.com/cortiq/cortiq/tensor"

// 512-bit Int8 dots (int8_avx512_amd64.s): the same integer sums as the
// AVX2 kernels, one float multiply-add per block.

//go:noescape
func dotQ4_0Q8VNNI(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32

//go:noescape
func dotQ4_0Q8AVX512(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32

//go:noescape
func dotQ8_0Q8VNNI(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32

//go:noescape
func dotQ8_0Q8AVX512(w *byte, xq *int8, xd8 *float32, xo *int32, nb int) float32

// useAVX512 installs the 512-bit Int8 kernels over the AVX2 ones, with
// VPDPBUSD when vnni is set.
func useAVX512(vnni bool) {
	q4, q8 := dotQ4_0Q8AVX512, dotQ8_0Q8AVX512
	if vnni {
		q4, q8 = dotQ4_0Q8VNNI, dotQ8_0Q8VNNI
	}
	int8Kernels[tensor.Q4_0] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = q4(&data[i*rb], &qx.q[0], &qx.d8[0], &qx.o4[0], len(qx.d))
		}
	}
	int8Kernels[tensor.Q8_0] = func(y []float32, data []byte, rb int, qx *q8x) {
		for i := range y {
			y[i] = q8(&data[i*rb], &qx.q[0], &qx.d8[0], &qx.o8[0], len(qx.d))
		}
	}
}

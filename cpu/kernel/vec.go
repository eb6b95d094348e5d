package kernel

import "math"

// RMSNorm writes x/rms(x)·w into dst, rms(x) = sqrt(mean(x²)+eps), with the
// mean accumulated in float64. A nil w means no weight; plusOne applies
// (1+w) instead of w (Gemma). dst may alias x.
func RMSNorm(dst, x, w []float32, eps float32, plusOne bool) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	dst = dst[:len(x)]
	switch {
	case w == nil:
		for i, v := range x {
			dst[i] = v * inv
		}
	case plusOne:
		w = w[:len(x)]
		for i, v := range x {
			dst[i] = v * inv * (1 + w[i])
		}
	default:
		w = w[:len(x)]
		for i, v := range x {
			dst[i] = v * inv * w[i]
		}
	}
}

// Softmax replaces x by its softmax (max-subtracted, float32 exp, sum in
// float64).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// SiLU replaces x by x·sigmoid(x).
func SiLU(x []float32) {
	for i, v := range x {
		x[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
}

// GELUTanh replaces x by the tanh approximation of GELU:
// 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))).
func GELUTanh(x []float32) {
	const c = 0.7978845608028654 // √(2/π)
	for i, v := range x {
		u := float64(v)
		x[i] = float32(0.5 * u * (1 + math.Tanh(c*(u+0.044715*u*u*u))))
	}
}

// Add sets dst[i] += a[i].
func Add(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] += a[i]
	}
}

// Mul sets dst[i] *= a[i].
func Mul(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] *= a[i]
	}
}

// Scale sets x[i] *= s.
func Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// Axpy sets dst[i] += a·x[i].
func Axpy(dst []float32, a float32, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += a * x[i]
	}
}

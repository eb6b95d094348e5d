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
	rmsScale(dst, x, w, rmsInv(ss, len(x), eps), plusOne)
}

// RMSNormRows is RMSNorm of the rows of x (cols values each) into dst,
// bit for bit: four rows' sums of squares run as independent chains (each
// in RMSNorm's order), and the scaling is the SIMD Scale and Mul
// (the same two roundings per element). dst and x may be the same.
func RMSNormRows(dst, x, w []float32, cols int, eps float32, plusOne bool) {
	n := len(x) / cols
	r := 0
	for ; r+4 <= n; r += 4 {
		x0, x1, x2, x3 := x[r*cols:(r+1)*cols], x[(r+1)*cols:(r+2)*cols], x[(r+2)*cols:(r+3)*cols], x[(r+3)*cols:(r+4)*cols]
		var s0, s1, s2, s3 float64
		for i := range x0 {
			s0 += float64(x0[i]) * float64(x0[i])
			s1 += float64(x1[i]) * float64(x1[i])
			s2 += float64(x2[i]) * float64(x2[i])
			s3 += float64(x3[i]) * float64(x3[i])
		}
		for k, ss := range [4]float64{s0, s1, s2, s3} {
			row := (r + k) * cols
			rmsScale(dst[row:row+cols], x[row:row+cols], w, rmsInv(ss, cols, eps), plusOne)
		}
	}
	for ; r < n; r++ {
		RMSNorm(dst[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], w, eps, plusOne)
	}
}

func rmsInv(ss float64, n int, eps float32) float32 {
	return float32(1 / math.Sqrt(ss/float64(n)+float64(eps)))
}

// rmsScale sets dst = x·inv·w (·(1+w) when plusOne; ·1 when w is nil),
// rounded after each multiply.
func rmsScale(dst, x, w []float32, inv float32, plusOne bool) {
	dst = dst[:len(x)]
	switch {
	case w == nil:
		copy(dst, x)
		Scale(dst, inv)
	case plusOne:
		w = w[:len(x)]
		for i, v := range x {
			dst[i] = v * inv * (1 + w[i])
		}
	default:
		copy(dst, x)
		Scale(dst, inv)
		Mul(dst, w[:len(x)])
	}
}

// Softmax replaces x by its softmax: max-subtracted, exponentials from
// Exp32, normalized by their float64 sum.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	expSubImpl(x, m)
	var sum float64
	for _, e := range x {
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// SoftmaxSink is Softmax over x with one more logit, sink, in the
// denominator only: x[i] = exp(x[i]-m) / (exp(sink-m) + Σ exp(x[j]-m)), m
// the max of x and sink (gpt-oss's attention sinks).
func SoftmaxSink(x []float32, sink float32) {
	m := sink
	for _, v := range x {
		m = max(m, v)
	}
	expSubImpl(x, m)
	sum := math.Exp(float64(sink - m))
	for _, e := range x {
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// SiLU replaces x by x·sigmoid(x) = x / (1 + exp(-x)), with Exp32.
func SiLU(x []float32) { siluImpl(x) }

// GELUTanh replaces x by the tanh approximation of GELU,
// 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))), computed as the equal
// x / (1 + exp(-2·√(2/π)·(x+0.044715·x³))) with Exp32.
func GELUTanh(x []float32) { geluImpl(x) }

// The activation functions have SIMD versions that perform the same
// float32 operations in the same order (no fused multiply-add), so every
// build gives bit-identical results.
var (
	siluImpl   = siluGeneric
	geluImpl   = geluGeneric
	expSubImpl = expSubGeneric
)

func siluGeneric(x []float32) {
	for i, v := range x {
		x[i] = v / (1 + Exp32(-v))
	}
}

const geluK = -1.5957691216057308 // -2·√(2/π)

func geluGeneric(x []float32) {
	for i, v := range x {
		x[i] = v / (1 + Exp32(geluArg(v)))
	}
}

func geluArg(v float32) float32 {
	t := float32(v * v)
	t = float32(t * 0.044715)
	t = float32(t * v)
	t = t + v
	return float32(t * geluK)
}

func expSubGeneric(x []float32, m float32) {
	for i, v := range x {
		x[i] = Exp32(v - m)
	}
}

// Exp32 is e^x in float32 (Cephes' expf: range reduction by ln 2 and a
// degree-6 polynomial), within 2 ulp of the exact value over the normal
// range. Inputs are clamped to [-87.3, 88.3], so very negative x gives
// about 1e-38 rather than 0 and very large x about 2e38 rather than +Inf;
// NaN gives NaN. Its operations are spelled out with explicit rounding so
// that the SIMD kernels reproduce it bit for bit.
func Exp32(x float32) float32 {
	if x != x {
		return x
	}
	x = min(max(x, expLo), expHi)
	fx := float32(math.Floor(float64(float32(x*log2e) + 0.5)))
	r := x - float32(fx*expC1)
	r = r - float32(fx*expC2)
	z := float32(r * r)
	p := float32(expP0)
	p = float32(p*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	p = float32(p*z) + r
	p = p + 1
	return p * math.Float32frombits(uint32(int32(fx)+127)<<23)
}

const (
	expLo = -87.3
	expHi = 88.3
	log2e = 1.44269504088896341
	expC1 = 0.693359375
	expC2 = -2.12194440e-4
	expP0 = 1.9875691500e-4
	expP1 = 1.3981999507e-3
	expP2 = 8.3334519073e-3
	expP3 = 4.1665795894e-2
	expP4 = 1.6666665459e-1
	expP5 = 5.0000001201e-1
)

// Add sets dst[i] += a[i].
func Add(dst, a []float32) {
	a = a[:len(dst)]
	n8 := simdLen(len(dst))
	if n8 > 0 {
		addSIMD(&dst[0], &a[0], n8)
	}
	for i := n8; i < len(dst); i++ {
		dst[i] += a[i]
	}
}

// Mul sets dst[i] *= a[i].
func Mul(dst, a []float32) {
	a = a[:len(dst)]
	n8 := simdLen(len(dst))
	if n8 > 0 {
		mulSIMD(&dst[0], &a[0], n8)
	}
	for i := n8; i < len(dst); i++ {
		dst[i] *= a[i]
	}
}

// Scale sets x[i] *= s.
func Scale(x []float32, s float32) {
	n8 := simdLen(len(x))
	if n8 > 0 {
		scaleSIMD(&x[0], s, n8)
	}
	for i := n8; i < len(x); i++ {
		x[i] *= s
	}
}

// Axpy sets dst[i] += a·x[i] (the product rounded before the add, never
// fused, on every platform).
func Axpy(dst []float32, a float32, x []float32) {
	x = x[:len(dst)]
	n8 := simdLen(len(dst))
	if n8 > 0 {
		axpySIMD(&dst[0], &x[0], a, n8)
	}
	for i := n8; i < len(dst); i++ {
		dst[i] += float32(a * x[i])
	}
}

// DotRows sets dst[j] = Dot(q, k[j·stride : j·stride+len(q)]) for each j,
// bit for bit: the rows of a matrix (a head's cached keys, stride apart)
// against one vector in one call, for attention.
func DotRows(dst, q, k []float32, stride int) {
	if len(dst) == 0 {
		return
	}
	_ = k[(len(dst)-1)*stride+len(q)-1]
	if dotRowsSIMD(dst, q, k, stride) {
		return
	}
	for j := range dst {
		dst[j] = Dot(q, k[j*stride:j*stride+len(q)])
	}
}

// AxpyRows adds a[j]·x[j·stride : j·stride+len(dst)] to dst for each j in
// order, each as Axpy adds it (bit for bit): attention's weighted sum of
// a head's cached values in one call, dst held in registers across rows.
func AxpyRows(dst, a, x []float32, stride int) {
	if len(a) == 0 || len(dst) == 0 {
		return
	}
	_ = x[(len(a)-1)*stride+len(dst)-1]
	n8 := axpyRowsSIMD(dst, a, x, stride)
	for j, aj := range a {
		row := x[j*stride : j*stride+len(dst)]
		if n8 == 0 {
			Axpy(dst, aj, row)
			continue
		}
		for i := n8; i < len(dst); i++ {
			dst[i] += float32(aj * row[i])
		}
	}
}

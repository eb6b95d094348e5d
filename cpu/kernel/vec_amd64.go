//go:build amd64 && !purego

package kernel

import "math"

//go:noescape
func expSubAVX2(x *float32, n int, m float32)

//go:noescape
func siluAVX2(x *float32, n int)

//go:noescape
func geluAVX2(x *float32, n int)

//go:noescape
func axpyAVX2(dst, x *float32, a float32, n int)

//go:noescape
func addAVX2(dst, a *float32, n int)

//go:noescape
func mulAVX2(dst, a *float32, n int)

//go:noescape
func scaleAVX2(x *float32, s float32, n int)

// The element-wise helpers go through these when simdLen allows.
var (
	axpySIMD  = axpyAVX2
	addSIMD   = addAVX2
	mulSIMD   = mulAVX2
	scaleSIMD = scaleAVX2
)

// simdLen is how many leading elements the SIMD element-wise helpers take.
func simdLen(n int) int {
	if !vecSIMD {
		return 0
	}
	return n &^ 7
}

var vecSIMD = hasAVX2

// vecConsts holds the constants of vec_amd64.s, each repeated 8 times
// (the row order is the C_* offsets there).
var vecConsts = func() (t [17][8]float32) {
	vals := [...]float32{
		expLo, expHi, log2e, 0.5, expC1, expC2,
		expP0, expP1, expP2, expP3, expP4, expP5,
		1, 0.044715, geluK, math.Float32frombits(1 << 31), math.Float32frombits(127),
	}
	for i, v := range vals {
		for j := range t[i] {
			t[i][j] = v
		}
	}
	return
}()

//go:noescape
func siluAVX512(x *float32, n int)

// siluAVX512Slice is siluAVX2Slice on 16 lanes (level AVX512 and up), bit
// for bit the same.
func siluAVX512Slice(x []float32) {
	n16 := len(x) &^ 15
	if n16 > 0 {
		siluAVX512(&x[0], n16)
	}
	siluAVX2Slice(x[n16:])
}

func siluAVX2Slice(x []float32) {
	n8 := len(x) &^ 7
	if n8 > 0 {
		siluAVX2(&x[0], n8)
	}
	siluGeneric(x[n8:])
}

func geluAVX2Slice(x []float32) {
	n8 := len(x) &^ 7
	if n8 > 0 {
		geluAVX2(&x[0], n8)
	}
	geluGeneric(x[n8:])
}

func expSubAVX2Slice(x []float32, m float32) {
	n8 := len(x) &^ 7
	if n8 > 0 {
		expSubAVX2(&x[0], n8, m)
	}
	expSubGeneric(x[n8:], m)
}

func useVecAVX2(on bool) {
	vecSIMD = on && hasAVX2
	if on {
		siluImpl, geluImpl, expSubImpl = siluAVX2Slice, geluAVX2Slice, expSubAVX2Slice
	} else {
		siluImpl, geluImpl, expSubImpl = siluGeneric, geluGeneric, expSubGeneric
	}
}

//go:noescape
func dotRowsAVX2(q, k *float32, n, stride, rows int, dst *float32)

//go:noescape
func axpyRows64AVX2(dst, a, x *float32, stride, rows int)

//go:noescape
func axpyRows8AVX2(dst, a, x *float32, stride, rows int)

// dotRowsSIMD is DotRows with dotF32AVX2's arithmetic per row (Dot at the
// AVX2 level and above), when len(q) is a multiple of 8.
func dotRowsSIMD(dst, q, k []float32, stride int) bool {
	if !vecSIMD || len(q) == 0 || len(q)%8 != 0 {
		return false
	}
	dotRowsAVX2(&q[0], &k[0], len(q), stride, len(dst), &dst[0])
	return true
}

// axpyRowsSIMD adds the rows to dst's leading elements, a multiple of 8,
// in strips of 64 (then 8) held in registers, as axpyAVX2 adds each row;
// it returns how many it did (0 when the level has no SIMD).
func axpyRowsSIMD(dst, a, x []float32, stride int) int {
	n8 := simdLen(len(dst))
	off := 0
	for ; off+64 <= n8; off += 64 {
		axpyRows64AVX2(&dst[off], &a[0], &x[off], stride, len(a))
	}
	for ; off+8 <= n8; off += 8 {
		axpyRows8AVX2(&dst[off], &a[0], &x[off], stride, len(a))
	}
	return n8
}

//go:noescape
func allFiniteAVX2(x *float32, n int) bool

// allFiniteSIMD reports whether the n floats at x (a multiple of 32)
// hold no NaN or infinity.
func allFiniteSIMD(x *float32, n int) bool { return allFiniteAVX2(x, n) }

package kernel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func ulpDiff(a float32, b float64) float64 {
	// Distance in units of float32 spacing at b.
	fb := float32(b)
	sp := math.Abs(float64(math.Nextafter32(fb, float32(math.Inf(1)))) - float64(fb))
	return math.Abs(float64(a)-b) / sp
}

func TestExp32(t *testing.T) {
	worst := 0.0
	for bits := uint32(0); bits < 1<<31; bits += 997 {
		for _, sign := range []uint32{0, 1 << 31} {
			x := math.Float32frombits(bits | sign)
			if x < expLo || x > expHi {
				continue
			}
			want := math.Exp(float64(x))
			if want < 0x1p-126 {
				continue // denormal results: absolute error only
			}
			if u := ulpDiff(Exp32(x), want); u > worst {
				worst = u
				if u > 2 {
					t.Fatalf("Exp32(%g) = %g, want %g (%.2f ulp)", x, Exp32(x), want, u)
				}
			}
		}
	}
	t.Logf("Exp32 worst error %.2f ulp", worst)
	for _, c := range []struct{ x, want float32 }{{0, 1}, {float32(math.Inf(-1)), math.Float32frombits(0x008b_0000)}, {1, math.E}} {
		got := Exp32(c.x)
		if c.x == 0 && got != 1 {
			t.Errorf("Exp32(0) = %g", got)
		}
		if c.x < -1e30 && (got <= 0 || got > 2e-38) {
			t.Errorf("Exp32(-Inf) = %g", got)
		}
	}
	if v := Exp32(float32(math.NaN())); v == v {
		t.Errorf("Exp32(NaN) = %g", v)
	}
	if v := Exp32(float32(math.Inf(1))); v < 1e38 || math.IsInf(float64(v), 0) {
		t.Errorf("Exp32(+Inf) = %g", v)
	}
}

func TestActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	x := make([]float32, 10001)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = float32(r.NormFloat64())
		case 1:
			x[i] = float32(r.NormFloat64() * 10)
		default:
			x[i] = float32(r.Float64()*200 - 100)
		}
	}
	forEachImpl(t, func(t *testing.T) {
		s := append([]float32(nil), x...)
		SiLU(s)
		g := append([]float32(nil), x...)
		GELUTanh(g)
		for i, v := range x {
			u := float64(v)
			ws := u / (1 + math.Exp(-u))
			// The sigmoid form of the tanh formula, free of its
			// cancellation for negative u.
			wg := u / (1 + math.Exp(-2*0.7978845608028654*(u+0.044715*u*u*u)))
			if math.Abs(u) < 3 {
				if tf := 0.5 * u * (1 + math.Tanh(0.7978845608028654*(u+0.044715*u*u*u))); math.Abs(tf-wg) > 1e-12 {
					t.Fatalf("reference forms disagree at %g: %g vs %g", u, tf, wg)
				}
			}
			if d := math.Abs(float64(s[i]) - ws); d > (4e-7+2e-7*math.Abs(u))*math.Abs(ws)+1e-30 {
				t.Fatalf("SiLU(%g) = %g, want %g", v, s[i], ws)
			}
			// The exponent is rounded to float32 first, so the
			// relative error grows with its size.
			arg := math.Abs(2 * 0.7978845608028654 * (u + 0.044715*u*u*u))
			if d := math.Abs(float64(g[i]) - wg); d > (1e-6+4e-7*arg)*math.Abs(wg)+1e-30 {
				t.Fatalf("GELUTanh(%g) = %g, want %g", v, g[i], wg)
			}
		}
		p := append([]float32(nil), x[:1003]...)
		Softmax(p)
		m := math.Inf(-1)
		for _, v := range x[:1003] {
			m = max(m, float64(v))
		}
		var sum float64
		for _, v := range x[:1003] {
			sum += math.Exp(float64(v) - m)
		}
		for i, v := range x[:1003] {
			w := math.Exp(float64(v)-m) / sum
			// v-m is rounded to float32 before the exponential.
			if d := math.Abs(float64(p[i]) - w); d > (1e-6+1e-7*(m-float64(v)))*w+1e-37 {
				t.Fatalf("Softmax[%d] = %g, want %g", i, p[i], w)
			}
		}
	})
}

// TestActivationsBitIdentical checks that the SIMD activations equal the
// portable ones bit for bit, special values included.
func TestActivationsBitIdentical(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no SIMD kernels on this build")
	}
	defer SetLevel(CurrentLevel())
	r := rand.New(rand.NewPCG(10, 10))
	x := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-40, -1e-40, 87.3, -87.3, 88.3, 100, -100, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.5, -0.5}
	for range 50000 {
		x = append(x, math.Float32frombits(r.Uint32()), float32(r.NormFloat64()*8))
	}
	same := func(a, b []float32) int {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
				return i
			}
		}
		return -1
	}
	for _, f := range []struct {
		name string
		fn   func([]float32)
	}{{"SiLU", SiLU}, {"GELUTanh", GELUTanh}, {"expSub", func(v []float32) { expSubImpl(v, 0.25) }}} {
		SetLevel(Generic)
		a := append([]float32(nil), x...)
		f.fn(a)
		for _, l := range []Level{AVX2, AVX512} {
			if !hasLevel(l) {
				continue
			}
			SetLevel(l)
			b := append([]float32(nil), x...)
			f.fn(b)
			if i := same(a, b); i >= 0 {
				t.Errorf("%s(%g): portable %g, %s %g", f.name, x[i], a[i], l, b[i])
			}
		}
	}
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	for _, n := range []int{0, 1, 7, 8, 9, 33, 4864} {
		a := randX(r, n)
		b := randX(r, n)
		forEachImpl(t, func(t *testing.T) {
			d := append([]float32(nil), a...)
			Axpy(d, 0.37, b)
			for i := range d {
				if w := a[i] + float32(0.37*b[i]); d[i] != w {
					t.Fatalf("Axpy n=%d [%d] = %g, want %g", n, i, d[i], w)
				}
			}
			d = append(d[:0], a...)
			Add(d, b)
			for i := range d {
				if d[i] != a[i]+b[i] {
					t.Fatalf("Add n=%d [%d]", n, i)
				}
			}
			d = append(d[:0], a...)
			Mul(d, b)
			for i := range d {
				if d[i] != a[i]*b[i] {
					t.Fatalf("Mul n=%d [%d]", n, i)
				}
			}
			d = append(d[:0], a...)
			Scale(d, -1.5)
			for i := range d {
				if d[i] != a[i]*-1.5 {
					t.Fatalf("Scale n=%d [%d]", n, i)
				}
			}
		})
	}
}

func TestReadSum(t *testing.T) {
	b := make([]byte, 1000)
	var want uint64
	for i := range b {
		b[i] = byte(i * 7)
	}
	for i := 0; i+8 <= len(b); i += 8 {
		want += uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24 |
			uint64(b[i+4])<<32 | uint64(b[i+5])<<40 | uint64(b[i+6])<<48 | uint64(b[i+7])<<56
	}
	forEachImpl(t, func(t *testing.T) {
		if got := ReadSum(b); got != want {
			t.Errorf("ReadSum = %d, want %d", got, want)
		}
		if got := ParallelReadSum(b); got != want {
			t.Errorf("ParallelReadSum = %d, want %d", got, want)
		}
	})
}

// TestDotAxpyRows checks at every level that DotRows and AxpyRows give
// Dot and Axpy's results row by row, bit for bit.
func TestDotAxpyRows(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	forEachImpl(t, func(t *testing.T) {
		for _, n := range []int{1, 7, 8, 24, 32, 64, 72, 128, 136, 200} {
			for _, rows := range []int{1, 3, 17} {
				stride := n + 5
				q, k := randX(r, n), randX(r, rows*stride)
				got := make([]float32, rows)
				DotRows(got, q, k, stride)
				for j := range rows {
					if want := Dot(q, k[j*stride:j*stride+n]); got[j] != want {
						t.Fatalf("DotRows n=%d rows=%d: [%d] = %g, Dot %g", n, rows, j, got[j], want)
					}
				}
				a, dst := randX(r, rows), randX(r, n)
				want := slices.Clone(dst)
				AxpyRows(dst, a, k, stride)
				for j := range rows {
					Axpy(want, a[j], k[j*stride:j*stride+n])
				}
				if !slices.Equal(dst, want) {
					t.Fatalf("AxpyRows n=%d rows=%d: %v, Axpy row by row %v", n, rows, dst[:min(n, 4)], want[:min(n, 4)])
				}
			}
		}
	})
}

// TestAllFinite checks the non-finite scan at every level with one NaN
// or infinity at each position (the SIMD part and the tail).
func TestAllFinite(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, n := range []int{0, 5, 32, 40, 96, 133} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(i) - 1e30
			}
			if !allFinite(x) {
				t.Fatalf("n=%d: finite data reported non-finite", n)
			}
			for i := range x {
				for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
					v := x[i]
					x[i] = bad
					if allFinite(x) {
						t.Fatalf("n=%d: %g at %d not found", n, bad, i)
					}
					x[i] = v
				}
			}
		}
	})
}

// TestRMSNormRows checks RMSNorm and RMSNormRows against the scalar
// loops (rmsNormRef) row by row, bit for bit, with and without weights, plus-one weights, in place, and with row
// counts that leave a remainder after the groups of four.
func TestRMSNormRows(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	for _, cols := range []int{1, 7, 64, 896, 2050} {
		for _, n := range []int{1, 3, 4, 9} {
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = float32(r.NormFloat64()) * 3
			}
			w := make([]float32, cols)
			for i := range w {
				w[i] = float32(r.NormFloat64())
			}
			for _, tc := range []struct {
				w       []float32
				plusOne bool
			}{{nil, false}, {w, false}, {w, true}} {
				want := make([]float32, len(x))
				for row := range n {
					rmsNormRef(want[row*cols:(row+1)*cols], x[row*cols:(row+1)*cols], tc.w, 1e-6, tc.plusOne)
					one := make([]float32, cols)
					RMSNorm(one, x[row*cols:(row+1)*cols], tc.w, 1e-6, tc.plusOne)
					for i, v := range one {
						if math.Float32bits(v) != math.Float32bits(want[row*cols+i]) {
							t.Fatalf("RMSNorm cols %d: [%d] = %g, want %g", cols, i, v, want[row*cols+i])
						}
					}
				}
				got := make([]float32, len(x))
				RMSNormRows(got, x, tc.w, cols, 1e-6, tc.plusOne)
				inPlace := append([]float32(nil), x...)
				RMSNormRows(inPlace, inPlace, tc.w, cols, 1e-6, tc.plusOne)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(inPlace[i]) != math.Float32bits(want[i]) {
						t.Fatalf("cols %d rows %d weights %v plusOne %v: [%d] = %g (in place %g), want %g", cols, n, tc.w != nil, tc.plusOne, i, got[i], inPlace[i], want[i])
					}
				}
			}
		}
	}
}

// rmsNormRef is RMSNorm as scalar loops: a float64 sum of squares, then
// x·inv·w rounded after each multiply.
func rmsNormRef(dst, x, w []float32, eps float32, plusOne bool) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		switch {
		case w == nil:
			dst[i] = v * inv
		case plusOne:
			dst[i] = v * inv * (1 + w[i])
		default:
			dst[i] = v * inv * w[i]
		}
	}
}

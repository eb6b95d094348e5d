package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// TestInt8 checks the Int8 kernels against a float64 evaluation of the
// same quantized arithmetic (tight), and against the exact product (loose,
// the activation rounding).
func TestInt8(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(6, 6))
	forEachImpl(t, func(t *testing.T) {
		if int8Kernels[tensor.Q4_0] == nil {
			// Test the portable reference loops too.
			defer func(k [len(int8Kernels)]int8Kernel) { int8Kernels = k }(int8Kernels)
			int8Kernels = genericInt8Kernels
		}
		for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
			for k, sh := range [][2]int{{1, 32}, {3, 64}, {37, 96}, {5, 224}, {130, 896}, {64, 4864}, {9, 256}, {40, 512}} {
				rows, cols := sh[0], sh[1]
				w := randWeight(t, r, c, rows, cols)
				if k >= 6 {
					w = rawWeight(r, c, rows, cols) // all byte values, -128 included
				}
				x := randX(r, cols)
				y := make([]float32, rows)
				MatVec(y, w, x)
				wf := make([]float32, rows*cols)
				if err := tensor.Dequantize(wf, c, w.Data); err != nil {
					t.Fatal(err)
				}
				qx := quantizeX(x)
				want, mag := make([]float64, rows), make([]float64, rows)
				for o := range rows {
					for i := range cols {
						xv := float64(qx.d[i/32]) * float64(qx.q[i])
						want[o] += float64(wf[o*cols+i]) * xv
						mag[o] += math.Abs(float64(wf[o*cols+i]) * xv)
					}
					if d := math.Abs(float64(y[o]) - want[o]); d > 4e-6*mag[o]+1e-30 {
						t.Fatalf("%s %dx%d row %d: %g, want %g (diff %g)", c, rows, cols, o, y[o], want[o], d)
					}
				}
				// Row ranges, aligned to the packed 16-row groups or not.
				for _, r0 := range []int{16, 5} {
					if r0 >= rows {
						continue
					}
					ys := make([]float32, rows-r0)
					MatVecRows(ys, w, x, r0, rows-r0)
					for o := range ys {
						if d := math.Abs(float64(ys[o]) - want[r0+o]); d > 4e-6*mag[r0+o]+1e-30 {
							t.Fatalf("%s %dx%d rows from %d, row %d: %g, want %g (diff %g)", c, rows, cols, r0, r0+o, ys[o], want[r0+o], d)
						}
					}
				}
				exact, emag := naive(w, x, 0, rows)
				for o := range rows {
					if d := math.Abs(float64(y[o]) - exact[o]); d > 0.02*emag[o] {
						t.Fatalf("%s %dx%d row %d: int8 %g vs exact %g: off by %g of Σ|wx|", c, rows, cols, o, y[o], exact[o], d/emag[o])
					}
				}
			}
		}
	})
}

// TestInt8Error reports the error of Int8 mode against Exact on random
// Gaussian data (the numbers quoted in the package documentation).
func TestInt8Error(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
		rows, cols := 512, 896
		if c == tensor.Q4_K || c == tensor.Q6_K {
			if !packedDecode {
				continue // exact at this level
			}
			cols = 1024
		}
		w := randWeight(t, r, c, rows, cols)
		x := randX(r, cols)
		y := make([]float32, rows)
		prev := SetMode(Int8)
		MatVec(y, w, x)
		SetMode(prev)
		exact, mag := naive(w, x, 0, rows)
		var maxRel, sumSq, refSq float64
		for o := range rows {
			d := float64(y[o]) - exact[o]
			maxRel = max(maxRel, math.Abs(d)/mag[o])
			sumSq += d * d
			refSq += exact[o] * exact[o]
		}
		t.Logf("%s %dx%d: int8 vs exact: max |Δ|/Σ|w·x| = %.2e, rms(Δ)/rms(y) = %.2e", c, rows, cols, maxRel, math.Sqrt(sumSq/refSq))
		if maxRel > 0.01 {
			t.Errorf("%s: int8 error %g", c, maxRel)
		}
	}
}

func BenchmarkMatVecInt8(b *testing.B) {
	defer SetMode(SetMode(Int8))
	for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
		for _, sh := range benchShapes {
			b.Run(fmt.Sprintf("%s_%dx%d", c, sh[0], sh[1]), func(b *testing.B) {
				w := benchWeight(c, sh[0], sh[1])
				x := randX(rand.New(rand.NewPCG(1, 2)), sh[1])
				y := make([]float32, sh[0])
				b.SetBytes(int64(len(w.Data)))
				for b.Loop() {
					MatVec(y, w, x)
				}
			})
		}
	}
}

// TestInt8MatMul checks Int8-mode MatMul (prefill) at every level: where
// the level has int8 tiles, against a float64 evaluation of the same
// quantized arithmetic (every token row quantized as MatVec quantizes
// it); at every level, against the exact product (loose).
func TestInt8MatMul(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(8, 8))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
			for k, sh := range [][3]int{{16, 32, 8}, {37, 96, 3}, {130, 896, 17}, {64, 4864, 9}, {9, 256, 2}, {40, 512, 8}} {
				rows, cols, n := sh[0], sh[1], sh[2]
				w := randWeight(t, r, c, rows, cols)
				if k >= 4 {
					w = rawWeight(r, c, rows, cols)
				}
				x := randX(r, n*cols)
				y := make([]float32, n*rows)
				for rep := range 2 { // the second call reuses the packed weight
					MatMul(y, w, x, n)
					wf := make([]float32, rows*cols)
					if err := tensor.Dequantize(wf, c, w.Data); err != nil {
						t.Fatal(err)
					}
					for tok := range n {
						xt := x[tok*cols : (tok+1)*cols]
						yt := y[tok*rows : (tok+1)*rows]
						if int8MatMul != nil {
							qx := quantizeX(xt)
							for o := range rows {
								var want, mag float64
								for i := range cols {
									xv := float64(qx.d[i/32]) * float64(qx.q[i])
									want += float64(wf[o*cols+i]) * xv
									mag += math.Abs(float64(wf[o*cols+i]) * xv)
								}
								if d := math.Abs(float64(yt[o]) - want); d > 4e-6*mag+1e-30 {
									t.Fatalf("%s %dx%d n=%d rep %d token %d row %d: %g, want %g (diff %g)", c, rows, cols, n, rep, tok, o, yt[o], want, d)
								}
							}
							putQ8x(qx)
						}
						exact, emag := naive(w, xt, 0, rows)
						for o := range rows {
							if d := math.Abs(float64(yt[o]) - exact[o]); d > 0.02*emag[o] {
								t.Fatalf("%s %dx%d token %d row %d: int8 %g vs exact %g: off by %g of Σ|wx|", c, rows, cols, tok, o, yt[o], exact[o], d/emag[o])
							}
						}
					}
				}
			}
		}
	})
}

// TestInt8KQuants checks Int8-mode q4_K and q6_K products (decode and prefill) at
// every level: where the level has packed int8 tiles, against a float64
// evaluation of the quantized arithmetic; everywhere, against the exact
// product (loose).
func TestInt8KQuants(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(11, 11))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range []tensor.Codec{tensor.Q4_K, tensor.Q6_K} {
			testInt8K(t, r, c)
		}
	})
}

func testInt8K(t *testing.T, r *rand.Rand, c tensor.Codec) {
	t.Helper()
	{
		for k, sh := range [][3]int{{16, 256, 1}, {37, 512, 1}, {130, 2048, 1}, {37, 512, 9}, {20, 768, 16}, {33, 256, 3}} {
			rows, cols, n := sh[0], sh[1], sh[2]
			w := randWeight(t, r, c, rows, cols)
			if k%2 == 1 {
				w = rawWeight(r, c, rows, cols)
			}
			x := randX(r, n*cols)
			y := make([]float32, n*rows)
			MatMul(y, w, x, n)
			wf := make([]float32, rows*cols)
			if err := tensor.Dequantize(wf, c, w.Data); err != nil {
				t.Fatal(err)
			}
			for tok := range n {
				xt := x[tok*cols : (tok+1)*cols]
				yt := y[tok*rows : (tok+1)*rows]
				if packedDecode {
					qx := quantizeX(xt)
					for o := range rows {
						var want, mag float64
						for i := range cols {
							xv := float64(qx.d[i/32]) * float64(qx.q[i])
							want += float64(wf[o*cols+i]) * xv
							mag += math.Abs(float64(wf[o*cols+i]) * xv)
						}
						if d := math.Abs(float64(yt[o]) - want); d > 4e-6*mag+1e-30 {
							t.Fatalf("%s %dx%d n=%d token %d row %d: %g, want %g (diff %g)", c, rows, cols, n, tok, o, yt[o], want, d)
						}
					}
					putQ8x(qx)
				}
				exact, emag := naive(w, xt, 0, rows)
				for o := range rows {
					if d := math.Abs(float64(yt[o]) - exact[o]); d > 0.02*emag[o] {
						t.Fatalf("%s %dx%d token %d row %d: int8 %g vs exact %g: off by %g of Σ|wx|", c, rows, cols, tok, o, yt[o], exact[o], d/emag[o])
					}
				}
			}
		}
	}
}

// BenchmarkInt8MatMul is Int8-mode prefill (64 tokens) at each level.
func BenchmarkInt8MatMul(b *testing.B) {
	defer SetMode(SetMode(Int8))
	defer SetLevel(CurrentLevel())
	const n = 64
	for _, l := range testLevels()[1:] {
		SetLevel(l)
		for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K, tensor.Q6_K} {
			for _, sh := range [][2]int{{4864, 896}, {896, 4864}} {
				b.Run(fmt.Sprintf("%s/%s_%dx%d", l, c, sh[0], sh[1]), func(b *testing.B) {
					w := benchWeight(c, sh[0], sh[1])
					x := randX(rand.New(rand.NewPCG(1, 2)), n*sh[1])
					y := make([]float32, n*sh[0])
					MatMul(y, w, x, n)
					b.ReportMetric(0, "ns/op")
					b.ResetTimer()
					for b.Loop() {
						MatMul(y, w, x, n)
					}
					b.ReportMetric(float64(2*n*sh[0]*sh[1])*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestInt8NonFinite: an activation holding a NaN or an infinity reaches
// every output of an Int8-mode product that reads it, at every level, as in
// the exact path: quantized to int8 it came out as ordinary numbers, so a
// broken model generated garbage instead of stopping at the layer that
// broke.
func TestInt8NonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
			rows, cols, n := 32, 256, 3
			w := randWeight(t, r, c, rows, cols)
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
				x := randX(r, cols*n)
				x[cols+17] = bad // token 1
				prev := SetMode(Int8)
				y := make([]float32, rows)
				MatVec(y, w, x[cols:2*cols])
				ym := make([]float32, rows*n)
				MatMul(ym, w, x, n)
				SetMode(prev)
				for o := range rows {
					if v := float64(y[o]); !math.IsNaN(v) && !math.IsInf(v, 0) {
						t.Fatalf("%s, x holding %v: MatVec row %d = %v, want a non-finite value", c, bad, o, y[o])
					}
					if v := float64(ym[rows+o]); !math.IsNaN(v) && !math.IsInf(v, 0) {
						t.Fatalf("%s, x holding %v: MatMul token 1 row %d = %v, want a non-finite value", c, bad, o, ym[rows+o])
					}
				}
			}
		}
	})
}

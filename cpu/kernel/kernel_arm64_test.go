//go:build arm64 && !purego

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// TestInt8NEONBitIdentical checks the NEON and SDOT block dots against
// the portable integer loops (genericInt8Kernels) bit for bit: the integer
// sums are exact and the float steps per block are the ones the Go
// compiler emits for the portable loops on arm64.
func TestInt8NEONBitIdentical(t *testing.T) {
	defer SetLevel(CurrentLevel())
	r := rand.New(rand.NewPCG(16, 16))
	for _, l := range testLevels() {
		if l < NEON {
			continue
		}
		SetLevel(l)
		t.Run(l.String(), func(t *testing.T) {
			for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
				for k, sh := range [][2]int{{1, 32}, {3, 64}, {17, 96}, {9, 896}, {4, 4864}, {9, 256}, {8, 512}} {
					rows, cols := sh[0], sh[1]
					w := randWeight(t, r, c, rows, cols)
					if k >= 5 {
						w = rawWeight(r, c, rows, cols) // every byte value, -128 included
					}
					x := randX(r, cols)
					if k == 3 {
						for i := range x {
							x[i] *= 1e30 // large scales
						}
					}
					rb, _ := c.RowBytes(cols)
					qx := quantizeX(x)
					got, want := make([]float32, rows), make([]float32, rows)
					int8Kernels[c](got, w.Data, rb, qx)
					genericInt8Kernels[c](want, w.Data, rb, qx)
					putQ8x(qx)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %dx%d row %d: %g (%#x), portable %g (%#x)", c, rows, cols, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		})
	}
}

// TestDotNEON checks Dot at every length around the 16-lane blocks against
// a float64 sum, within checkClose's bound.
func TestDotNEON(t *testing.T) {
	defer SetLevel(CurrentLevel())
	r := rand.New(rand.NewPCG(17, 17))
	for _, l := range testLevels() {
		SetLevel(l)
		for n := range 100 {
			a, b := randX(r, n), randX(r, n+3)
			var want, mag float64
			for i := range n {
				p := float64(a[i]) * float64(b[i])
				want += p
				mag += math.Abs(p)
			}
			checkClose(t, fmt.Sprintf("%s dot n=%d", l, n), []float32{Dot(a, b)}, []float64{want}, []float64{mag})
		}
	}
}

// TestInt8MatMulNEON checks that Int8-mode MatMul of q8_0, q4_0, q4_K and q6_K gives
// every token the outputs of its Int8 MatVec, bit for bit.
func TestInt8MatMulNEON(t *testing.T) {
	defer SetMode(SetMode(Int8))
	defer SetLevel(CurrentLevel())
	r := rand.New(rand.NewPCG(18, 18))
	for _, l := range testLevels() {
		if l < NEON {
			continue
		}
		SetLevel(l)
		for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
			for _, sh := range [][3]int{{37, 96, 3}, {40, 512, 9}, {17, 256, 70}, {5, 4608, 2}} {
				rows, cols, n := sh[0], sh[1], sh[2]
				if cols%c.BlockLen() != 0 {
					continue
				}
				w := rawWeight(r, c, rows, cols)
				x := randX(r, n*cols)
				y := make([]float32, n*rows)
				MatMul(y, w, x, n)
				yv := make([]float32, rows)
				for tok := range n {
					MatVec(yv, w, x[tok*cols:(tok+1)*cols])
					for o, v := range yv {
						if got := y[tok*rows+o]; math.Float32bits(got) != math.Float32bits(v) {
							t.Fatalf("%s %s %dx%d n=%d token %d row %d: MatMul %g, MatVec %g", l, c, rows, cols, n, tok, o, got, v)
						}
					}
				}
			}
		}
	}
}

// TestInt8KNEON checks Int8-mode q4_K and q6_K MatVec against a float64
// evaluation of the same quantized arithmetic (the activations rounded
// per 32 as quantizeX rounds them).
func TestInt8KNEON(t *testing.T) {
	defer SetMode(SetMode(Int8))
	defer SetLevel(CurrentLevel())
	r := rand.New(rand.NewPCG(19, 19))
	for _, l := range testLevels() {
		if l < NEON {
			continue
		}
		SetLevel(l)
		for _, c := range []tensor.Codec{tensor.Q4_K, tensor.Q6_K} {
			for k, sh := range [][2]int{{16, 256}, {37, 512}, {9, 4608}, {33, 2048}} {
				rows, cols := sh[0], sh[1]
				w := randWeight(t, r, c, rows, cols)
				if k%2 == 1 {
					w = rawWeight(r, c, rows, cols)
				}
				x := randX(r, cols)
				y := make([]float32, rows)
				MatVec(y, w, x)
				wf := make([]float32, rows*cols)
				if err := tensor.Dequantize(wf, c, w.Data); err != nil {
					t.Fatal(err)
				}
				qx := quantizeX(x)
				for o := range rows {
					var want, mag float64
					for i := range cols {
						xv := float64(qx.d[i/32]) * float64(qx.q[i])
						want += float64(wf[o*cols+i]) * xv
						mag += math.Abs(float64(wf[o*cols+i]) * xv)
					}
					if d := math.Abs(float64(y[o]) - want); d > 4e-6*mag+1e-30 {
						t.Fatalf("%s %s %dx%d row %d: %g, want %g (diff %g)", l, c, rows, cols, o, y[o], want, d)
					}
				}
				putQ8x(qx)
			}
		}
	}
}

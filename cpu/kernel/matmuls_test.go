package kernel

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// TestMatMuls checks that a fused MatMuls call gives exactly what separate
// MatMul calls give, in both modes and for one and several tokens.
func TestMatMuls(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	const cols = 256
	for _, m := range []Mode{Exact, Int8} {
		prev := SetMode(m)
		for _, n := range []int{1, 3} {
			ws := []*tensor.Tensor{
				randWeight(t, r, tensor.Q4_0, 1001, cols),
				randWeight(t, r, tensor.Q8_0, 9, cols),
				randWeight(t, r, tensor.F32, 33, cols),
				randWeight(t, r, tensor.Q4_K, 5, cols),
			}
			x := randX(r, n*cols)
			var ps []Product
			for _, w := range ws {
				ps = append(ps, Product{Y: make([]float32, n*w.Shape[0]), W: w})
			}
			MatMuls(x, n, ps...)
			for i, w := range ws {
				want := make([]float32, n*w.Shape[0])
				MatMul(want, w, x, n)
				for j := range want {
					if want[j] != ps[i].Y[j] {
						t.Fatalf("%s n=%d product %d (%s) y[%d] = %g, separate MatMul %g", m, n, i, w.Codec, j, ps[i].Y[j], want[j])
					}
				}
			}
		}
		SetMode(prev)
	}
}

// TestMatMulsTiles checks, at every level, that MatMuls of products that
// all have Int8 tiles (one pass over shared quantized tokens where the
// level has the tiles) gives exactly what separate MatMul calls give,
// with partial 16-row groups and token panels.
func TestMatMulsTiles(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(9, 9))
	const cols = 512
	forEachImpl(t, func(t *testing.T) {
		for _, n := range []int{2, 9, 17} {
			ws := []*tensor.Tensor{
				randWeight(t, r, tensor.Q4_0, 200, cols),
				randWeight(t, r, tensor.Q8_0, 40, cols),
				randWeight(t, r, tensor.Q4_K, 5, cols),
				randWeight(t, r, tensor.Q6_K, 33, cols),
				randWeight(t, r, tensor.IQ4_NL, 16, cols),
			}
			x := randX(r, n*cols)
			var ps []Product
			for _, w := range ws {
				ps = append(ps, Product{Y: make([]float32, n*w.Shape[0]), W: w})
			}
			MatMuls(x, n, ps...)
			for i, w := range ws {
				want := make([]float32, n*w.Shape[0])
				MatMul(want, w, x, n)
				for j := range want {
					if want[j] != ps[i].Y[j] {
						t.Fatalf("n=%d product %d (%s) y[%d] = %g, separate MatMul %g", n, i, w.Codec, j, ps[i].Y[j], want[j])
					}
				}
			}
		}
	})
}

// TestAMXTiles checks that the AMX level's prefill products (q4_0, q8_0,
// and q5_0 packed as q8_0) are bit for bit those of the AVX512VNNI
// tiles (the same integer block sums, scaled and added in the same
// order), alone and as one MatMuls pass, with odd 16-row groups and
// partial pairs of token panels, at 2 and 16 workers (which split the
// token pairs of small products).
func TestAMXTiles(t *testing.T) {
	if !hasLevel(AMX) {
		t.Skip("this CPU (or build) has no AMX level")
	}
	defer SetMode(SetMode(Int8))
	defer SetLevel(CurrentLevel())
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 16} {
		runtime.GOMAXPROCS(procs)
		testAMXTiles(t)
	}
}

func testAMXTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 16))
	for _, sh := range [][2]int{{16, 32}, {48, 96}, {200, 512}, {40, 896}} {
		rows, cols := sh[0], sh[1]
		ws := []*tensor.Tensor{
			randWeight(t, r, tensor.Q4_0, rows, cols),
			randWeight(t, r, tensor.Q8_0, rows+16, cols),
			randWeight(t, r, tensor.Q5_0, rows+3, cols),
		}
		for _, n := range []int{2, 16, 17, 33, 64, 70} {
			x := randX(r, n*cols)
			for _, w := range ws {
				want := make([]float32, n*w.Shape[0])
				SetLevel(AVX512VNNI)
				MatMul(want, w, x, n)
				SetLevel(AMX)
				got := make([]float32, n*w.Shape[0])
				MatMul(got, w, x, n)
				for j := range want {
					if want[j] != got[j] {
						t.Fatalf("%s %v n=%d: y[%d] = %g at amx, %g at avx512vnni", w.Codec, w.Shape, n, j, got[j], want[j])
					}
				}
			}
			var ps []Product
			for _, w := range ws {
				ps = append(ps, Product{Y: make([]float32, n*w.Shape[0]), W: w})
			}
			MatMuls(x, n, ps...)
			for i, w := range ws {
				want := make([]float32, n*w.Shape[0])
				MatMul(want, w, x, n)
				for j := range want {
					if want[j] != ps[i].Y[j] {
						t.Fatalf("MatMuls n=%d product %d (%s) y[%d] = %g, separate MatMul %g", n, i, w.Codec, j, ps[i].Y[j], want[j])
					}
				}
			}
		}
	}
}

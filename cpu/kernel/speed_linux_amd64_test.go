//go:build !purego

package kernel

import (
	"fmt"
	"os"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// TestInt8RowTileSpeed compares the one-row and four-row Int8 kernels on a
// matrix that fits the L2 cache (compute, not memory, bound).
func TestInt8RowTileSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0} {
		rows, cols := 256, 896
		w := benchWeight(c, rows, cols)
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		y := make([]float32, rows)
		rb := len(w.Data) / rows
		qx := quantizeX(x)
		nb := len(qx.d)
		d1 := cpuTime(20, func() {
			for i := range rows {
				if c == tensor.Q4_0 {
					y[i] = dotQ4_0Q8AVX2(&w.Data[i*rb], &qx.q[0], &qx.d[0], &qx.s[0], nb)
				} else {
					y[i] = dotQ8_0Q8AVX2(&w.Data[i*rb], &qx.q[0], &qx.d[0], nb)
				}
			}
		})
		d4 := cpuTime(20, func() {
			for i := 0; i < rows; i += 4 {
				if c == tensor.Q4_0 {
					dotQ4_0Q8x4AVX2(&w.Data[i*rb], rb, &qx.q[0], &qx.d[0], &qx.c[0], nb, (*[4]float32)(y[i:]))
				} else {
					dotQ8_0Q8x4AVX2(&w.Data[i*rb], rb, &qx.q[0], &qx.d[0], nb, (*[4]float32)(y[i:]))
				}
			}
		})
		fmt.Printf("%s: 1-row %.1f us, 4-row %.1f us; %.2f / %.2f ns per row-block\n", c, float64(d1)/1e3, float64(d4)/1e3, float64(d1)/float64(rows*nb), float64(d4)/float64(rows*nb))
	}
}

// TestGemmTileSpeed is the 6×16 float32 tile on hot data: the ceiling of
// MatMul.
func TestGemmTileSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	for _, k := range []int{128, 256, 896, 4864} {
		w := make([]float32, 6*k)
		xp := make([]float32, 16*k)
		for i := range w {
			w[i] = float32(i%5) * 0.1
		}
		for i := range xp {
			xp[i] = float32(i%3) * 0.1
		}
		var out [96]float32
		calls := 20000000 / k
		d := cpuTime(calls, func() { gemm6x16AVX2(&w[0], k, &xp[0], k, &out) })
		fmt.Printf("gemm6x16 k=%d: %.1f GFLOP/s\n", k, float64(2*6*16*k)/float64(d))
	}
}

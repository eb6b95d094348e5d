package kernel

import (
	"fmt"
	"os"
	"testing"
)

func TestGemmKernelSpeed(t *testing.T) {
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

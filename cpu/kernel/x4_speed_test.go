package kernel

import (
	"fmt"
	"os"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

func TestX4Speed(t *testing.T) {
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

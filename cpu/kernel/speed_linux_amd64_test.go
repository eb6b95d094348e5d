//go:build !purego

package kernel

import (
	"fmt"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/cortiq/cortiq/tensor"
)

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

// TestInt8StreamSpeed is an Int8 kernel on a matrix far larger than the
// caches, one thread, next to a plain read of the same bytes: decode's
// bound is this stream.
func TestInt8StreamSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	if l, err := ParseLevel(os.Getenv("CORTIQ_KSPEED")); err == nil {
		defer SetLevel(SetLevel(l))
	}
	for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0} {
		const rows, cols = 65536, 2048
		w := benchWeight(c, rows, cols)
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		y := make([]float32, rows)
		rb := len(w.Data) / rows
		qx := quantizeX(x)
		u := unsafe.Slice((*uint64)(unsafe.Pointer(&w.Data[0])), len(w.Data)/8)
		var sink uint64
		bk, bs := time.Hour, time.Hour
		for range 6 {
			t0 := time.Now()
			int8Kernels[c](y, w.Data, rb, qx)
			bk = min(bk, time.Since(t0))
			t0 = time.Now()
			var s0, s1, s2, s3 uint64
			for i := 0; i+4 <= len(u); i += 4 {
				s0 += u[i]
				s1 += u[i+1]
				s2 += u[i+2]
				s3 += u[i+3]
			}
			sink += s0 ^ s1 ^ s2 ^ s3
			bs = min(bs, time.Since(t0))
		}
		fmt.Printf("%s int8 %dx%d: %.2f GB/s; plain read %.2f GB/s (%d)\n", c, rows, cols, float64(len(w.Data))/float64(bk), float64(len(w.Data))/float64(bs), sink&1)
	}
}

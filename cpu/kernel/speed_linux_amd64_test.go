//go:build !purego

package kernel

import (
	"fmt"
	"os"
	"strconv"
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

// TestTileSpeed is prefill's tile kernels alone on cached data (one
// 16-row group against 64 tokens, K = 896), thread CPU time: the Int8
// GEMM's ceiling at the VNNI and AMX levels. CORTIQ_KSPEED=1 go test
// -run TileSpeed -v.
func TestTileSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	cols, n := 896, 64
	if v, err := strconv.Atoi(os.Getenv("CORTIQ_KSPEED_K")); err == nil {
		cols = v
	}
	if v, err := strconv.Atoi(os.Getenv("CORTIQ_KSPEED_N")); err == nil {
		n = v
	}
	nb := cols / 32
	for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0} {
		w := benchWeight(c, i8Rows, cols)
		rb := len(w.Data) / i8Rows
		pw := packWeights(c, w.Data, rb, i8Rows, cols)
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		bp := packPanels(x, n, cols)
		tile := tileKernel(c)
		var out [128]float32
		d := cpuTime(2000, func() {
			for q := range n / i8Tokens {
				tile(&pw.data[0], &(*bp)[q*nb*i8PanelB], nb, &out)
			}
		})
		fmt.Printf("%-5s vnni tile 16 rows × %d tokens × %d: %.1f GOP/s\n", c, n, cols, float64(2*16*n*cols)/float64(d))
		if detected < AMX {
			continue
		}
		ap := packAMXPanels(x, n, cols)
		amx := gemmQ8_0AMX
		if c == tensor.Q4_0 {
			amx = gemmQ4_0AMX
		}
		pairs := (n + 2*amxTokens - 1) / (2 * amxTokens)
		b := getAMXBuf(pairs)
		pw2 := packWeights(c, benchWeight(c, 2*i8Rows, cols).Data, rb, 2*i8Rows, cols)
		d = cpuTime(1000, func() {
			amx(&pw2.data[0], &pw2.data[nb*i8Stride(c)], &(*ap)[0], nb, pairs, &b.acc[0], &amxConfig, b.scratch)
		})
		fmt.Printf("%-5s amx tile 32 rows × %d tokens × %d: %.1f GOP/s\n", c, n, cols, float64(2*32*n*cols)/float64(d))
	}
}

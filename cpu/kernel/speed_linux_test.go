package kernel

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortiq/cortiq/tensor"
)

// threadCPU is the CPU time the calling OS thread has used: timing
// against it instead of the wall clock keeps measurements usable on a
// machine shared with other jobs.
func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// cpuTime reports the best CPU time per call of f over several rounds.
func cpuTime(calls int, f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := time.Duration(1 << 62)
	for range 15 {
		t0 := threadCPU()
		for range calls {
			f()
		}
		best = min(best, (threadCPU()-t0)/time.Duration(calls))
	}
	return best
}

// TestKernelSpeed prints single-thread kernel throughput measured in
// thread CPU time. Run with CORTIQ_KSPEED=1 go test -run KernelSpeed -v.
func TestKernelSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	if l, err := ParseLevel(os.Getenv("CORTIQ_KSPEED")); err == nil {
		defer SetLevel(SetLevel(l))
	}
	for _, c := range allCodecs {
		for _, sh := range [][2]int{{256, 2048}, {2048, 2048}} {
			w := benchWeight(c, sh[0], sh[1])
			x := make([]float32, sh[1])
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			y := make([]float32, sh[0])
			k := matvecKernel(c)
			aux := prepareX(c, x)
			rb := len(w.Data) / sh[0]
			d := cpuTime(max(2, 10000000/len(w.Data)), func() { k(y, w.Data, rb, x, aux) })
			fmt.Printf("%-5s %5dx%-5d %8.1f us  %6.2f GB/s (1 thread, CPU time)\n", c, sh[0], sh[1], float64(d)/1e3, float64(len(w.Data))/float64(d))
			if int8Kernels[c] != nil || packedDecode && packable(c) {
				// MatVec as decode calls it (the packed tiles where the
				// level has them), activation quantization included.
				prev := SetMode(Int8)
				serialForTest = true
				d := cpuTime(max(2, 10000000/len(w.Data)), func() { MatVec(y, w, x) })
				serialForTest = false
				SetMode(prev)
				fmt.Printf("%-5s %5dx%-5d %8.1f us  %6.2f GB/s (1 thread, CPU time, int8 mode)\n", c, sh[0], sh[1], float64(d)/1e3, float64(len(w.Data))/float64(d))
			}
		}
	}
}

func TestMatMulSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	serialForTest = true
	defer func() { serialForTest = false }()
	if l, err := ParseLevel(os.Getenv("CORTIQ_KSPEED")); err == nil {
		defer SetLevel(SetLevel(l))
	}
	if os.Getenv("CORTIQ_KSPEED_MODE") == "int8" {
		defer SetMode(SetMode(Int8))
	}
	n := 64
	if v, err := strconv.Atoi(os.Getenv("CORTIQ_KSPEED_N")); err == nil {
		n = v
	}
	codecs := allCodecs
	if s := os.Getenv("CORTIQ_KSPEED_CODECS"); s != "" {
		codecs = nil
		for _, name := range strings.Split(s, ",") {
			c, err := tensor.ParseCodec(name)
			if err != nil {
				t.Fatal(err)
			}
			codecs = append(codecs, c)
		}
	}
	for _, c := range codecs {
		for _, sh := range [][2]int{{1024, 1024}, {4864, 1024}, {1024, 4864}, {896, 896}, {4864, 896}, {896, 4864}} {
			w := benchWeight(c, sh[0], sh[1])
			x := make([]float32, n*sh[1])
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			y := make([]float32, n*sh[0])
			MatMul(y, w, x, n) // packs the weight once in Int8 mode
			d := cpuTime(1, func() { MatMul(y, w, x, n) })
			fmt.Printf("%-5s %5dx%-5d n=%d %8.1f us  %6.2f GFLOP/s (1 thread, CPU time)\n", c, sh[0], sh[1], n, float64(d)/1e3, float64(2*n*sh[0]*sh[1])/float64(d))
		}
	}
}

// TestDecodeStreamSpeed prints the GGUF bytes a second of one decode step
// of Llama-3.2-1B (BenchmarkDecodeStream's products, 0.7-1.3 GB, past the
// last-level cache) on one thread, in thread CPU time (median and best of
// 12 steps): the memory stream's efficiency per core, usable on a machine
// shared with other jobs. Run with CORTIQ_KSPEED=1 (or a level) go test
// -run DecodeStreamSpeed -v; CORTIQ_KSPEED_CODECS=q4_0,q8_0,q4_K;
// CORTIQ_KSPEED_SHAPE=qwen-0.5b for Qwen2.5-0.5B's products instead.
func TestDecodeStreamSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	if l, err := ParseLevel(os.Getenv("CORTIQ_KSPEED")); err == nil {
		defer SetLevel(SetLevel(l))
	}
	defer SetMode(SetMode(Int8))
	// CORTIQ_KSPEED_WALL=1: all workers, wall clock, the best of 40
	// steps (the memory stream as decode runs it; on a shared machine
	// the best step is the one that had the cores).
	wall := os.Getenv("CORTIQ_KSPEED_WALL") != ""
	serialForTest = !wall
	defer func() { serialForTest = false }()
	names := strings.Split(cmp.Or(os.Getenv("CORTIQ_KSPEED_CODECS"), "q4_0,q8_0,q4_K"), ",")
	for _, name := range names {
		c, err := tensor.ParseCodec(name)
		if err != nil {
			t.Fatal(err)
		}
		shape := llama1bDecode
		if os.Getenv("CORTIQ_KSPEED_SHAPE") == "qwen-0.5b" {
			shape = qwen05bDecode
		}
		step, bytes, done := shape(c)
		if wall {
			step()
			var r []float64
			for range 40 {
				t0 := time.Now()
				step()
				r = append(r, float64(bytes)/float64(time.Since(t0)))
			}
			done()
			slices.Sort(r)
			fmt.Printf("%-5s decode step %6.2f GB/s median, %6.2f best (%d workers, wall clock, level %s)\n", c, r[len(r)/2], r[len(r)-1], Workers(), CurrentLevel())
			continue
		}
		runtime.LockOSThread()
		step()
		var r []float64
		for range 12 {
			t0 := threadCPU()
			step()
			r = append(r, float64(bytes)/float64(threadCPU()-t0))
		}
		runtime.UnlockOSThread()
		done()
		slices.Sort(r)
		fmt.Printf("%-5s decode step %6.2f GB/s median, %6.2f best (1 thread, CPU time, level %s)\n", c, r[len(r)/2], r[len(r)-1], CurrentLevel())
	}
}

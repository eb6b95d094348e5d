package kernel

import (
	"cmp"
	"fmt"
	"math/rand/v2"
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

// TestPrefillStepSpeed prints the int8 operations a second of the matrix
// products of one prefill step (n tokens, default 64) through every layer
// of Qwen2.5-0.5B (CORTIQ_KSPEED_SHAPE=llama-1b: Llama-3.2-1B), issued as
// the CPU session issues them (q/k/v and gate/up as MatMuls groups), on
// one thread in thread CPU time (median and best of 8 steps): what the
// products cost with their activation quantization, panel packing and
// stores, on weights past the caches. CORTIQ_KSPEED=1 go test -run
// PrefillStepSpeed -v ./cpu/kernel (CORTIQ_KSPEED_N, CORTIQ_KSPEED_CODECS).
func TestPrefillStepSpeed(t *testing.T) {
	if os.Getenv("CORTIQ_KSPEED") == "" {
		t.Skip("set CORTIQ_KSPEED=1 to measure")
	}
	if l, err := ParseLevel(os.Getenv("CORTIQ_KSPEED")); err == nil {
		defer SetLevel(SetLevel(l))
	}
	defer SetMode(SetMode(Int8))
	// CORTIQ_KSPEED_WALL=1: all workers, wall clock (the hand-offs
	// between the workers included).
	wall := os.Getenv("CORTIQ_KSPEED_WALL") != ""
	serialForTest = !wall
	defer func() { serialForTest = false }()
	n := 64
	if v, err := strconv.Atoi(os.Getenv("CORTIQ_KSPEED_N")); err == nil {
		n = v
	}
	for _, name := range strings.Split(cmp.Or(os.Getenv("CORTIQ_KSPEED_CODECS"), "q4_0,q8_0,q4_K"), ",") {
		c, err := tensor.ParseCodec(name)
		if err != nil {
			t.Fatal(err)
		}
		shape := [5]int{896, 4864, 128, 24, 896}
		if os.Getenv("CORTIQ_KSPEED_SHAPE") == "llama-1b" {
			shape = [5]int{2048, 8192, 512, 16, 2048}
		}
		if _, err := c.RowBytes(shape[0]); err != nil {
			fmt.Printf("%-5s prefill step: skipped (%v)\n", c, err)
			continue
		}
		step, ops, done := prefillStep(c, shape[0], shape[1], shape[2], shape[4], shape[3], n)
		runtime.LockOSThread()
		step()
		var r []float64
		for range 8 {
			t0, w0 := threadCPU(), time.Now()
			step()
			if wall {
				r = append(r, ops/float64(time.Since(w0)))
				continue
			}
			r = append(r, ops/float64(threadCPU()-t0))
		}
		runtime.UnlockOSThread()
		done()
		slices.Sort(r)
		how := "1 thread, CPU time"
		if wall {
			how = fmt.Sprintf("%d workers, wall clock", Workers())
		}
		fmt.Printf("%-5s prefill step n=%d %7.1f GOP/s median, %7.1f best (%s, level %s)\n", c, n, r[len(r)/2], r[len(r)-1], how, CurrentLevel())
	}
}

// prefillStep is decodeStep's products for n tokens (no output head).
func prefillStep(c tensor.Codec, hidden, ffn, kv, qdim, layers, n int) (step func(), ops float64, done func()) {
	type layer struct{ q, k, v, o, gate, up, down *tensor.Tensor }
	ls := make([]layer, layers)
	var all []*tensor.Tensor
	for i := range ls {
		ls[i] = layer{
			benchWeight(c, qdim, hidden), benchWeight(c, kv, hidden), benchWeight(c, kv, hidden),
			benchWeight(c, hidden, qdim), benchWeight(c, ffn, hidden), benchWeight(c, ffn, hidden),
			benchWeight(c, hidden, ffn),
		}
		all = append(all, ls[i].q, ls[i].k, ls[i].v, ls[i].o, ls[i].gate, ls[i].up, ls[i].down)
	}
	for _, w := range all {
		ops += 2 * float64(n) * float64(matRows(w)) * float64(w.Cols())
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := randX(r, n*hidden)
	h := make([]float32, n*ffn)
	g := make([]float32, n*ffn)
	y := make([]float32, n*hidden)
	q, k, v := make([]float32, n*qdim), make([]float32, n*kv), make([]float32, n*kv)
	step = func() {
		for _, l := range ls {
			MatMuls(x, n, Product{q, l.q}, Product{k, l.k}, Product{v, l.v})
			MatMul(y, l.o, q, n)
			MatMuls(x, n, Product{g, l.gate}, Product{h, l.up})
			MatMul(y, l.down, h, n)
		}
	}
	done = func() {
		for _, w := range all {
			Unpack(w)
		}
	}
	return step, ops, done
}

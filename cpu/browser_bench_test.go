package cpu

import (
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// browserShape is the e2e tests' qwen-mini: Qwen2.5-0.5B's widths (896
// hidden, 14/2 heads, FFN 4864) with 4 layers and a 32k vocabulary, the
// size of model a tab without WebGPU runs on the CPU engine.
var browserShape = synth.Shape{Name: "qwen-mini", Arch: "qwen2", Hidden: 896, Layers: 4, Heads: 14, KVHeads: 2,
	FFN: 4864, Vocab: 32000, Tied: true, QKVBias: true, RopeTheta: 1000000, Context: 4096}

// browserLevel forces a kernel level for BenchmarkBrowserDecode and
// BenchmarkBrowserParts
// (-browser.level generic: the portable Go kernels wasm runs).
var browserLevel = flag.String("browser.level", "", "kernel level for the BenchmarkBrowser* benchmarks (generic, avx2, …; empty: the best)")

// BenchmarkBrowserDecode decodes single tokens of the qwen-mini shape per
// codec. Run natively (at any CORTIQ_CPU_LEVEL) and as wasm under Node —
//
//	GOOS=js GOARCH=wasm go test -run XXX -bench BrowserDecode ./cpu/   (with $(go env GOROOT)/lib/wasm on PATH)
//
// — it says what the browser's wasm CPU path costs against the native
// generic kernels of the same Go code (-browser.level generic; BENCHMARKS.md,
// issue 16).
func BenchmarkBrowserDecode(b *testing.B) {
	forceBrowserLevel(b)
	dir := b.TempDir()
	for _, c := range browserCodecs {
		b.Run(c.String(), func(b *testing.B) {
			s := browserSession(b, dir, c, b.N+40)
			// A few steps untimed: wasm engines compile hot functions
			// again, optimized, after a while (V8: Liftoff, then
			// TurboFan), and the prompt ran other kernels than decode.
			for i := range 8 {
				if _, err := s.Forward([]int{i + 1}, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := s.Forward([]int{(i * 7919) % browserShape.Vocab}, false); err != nil {
					b.Fatal(err)
				}
			}
			c1 := cpuTime()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			if c1 > c0 {
				// On a shared machine the wall clock counts the other
				// processes too; the process's CPU time does not (it
				// counts its own helper threads: run with GOMAXPROCS=1).
				b.ReportMetric(float64(b.N)/(c1-c0).Seconds(), "cpu-tok/s")
			}
		})
	}
}

// browserCodecs are the codecs the browser benchmarks decode.
var browserCodecs = []tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.F16}

// forceBrowserLevel sets -browser.level's kernel level for the rest of b.
func forceBrowserLevel(b *testing.B) {
	if *browserLevel == "" {
		return
	}
	l, err := kernel.ParseLevel(*browserLevel)
	if err != nil {
		b.Fatal(err)
	}
	old := kernel.SetLevel(l)
	b.Cleanup(func() { kernel.SetLevel(old) })
}

// browserSession writes the qwen-mini shape in codec c under dir, opens it
// on the CPU and returns a session of maxLen positions that has read a
// 32-token prompt.
func browserSession(b *testing.B, dir string, c tensor.Codec, maxLen int) *Session {
	path := filepath.Join(dir, c.String()+".gguf")
	if err := synth.Write(path, browserShape, c); err != nil {
		b.Fatal(err)
	}
	m, err := importer.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	be, err := New(m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := be.newSession(maxLen)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Forward(make([]int, 32), false); err != nil {
		b.Fatal(err)
	}
	return s
}

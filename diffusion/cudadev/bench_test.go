package cudadev

import (
	flagpkg "flag"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/cuda/kernels"
	"github.com/cortiq/cortiq/diffusion"
)

// BenchmarkDiTStep's shape, on the test binary's command line, e.g.
//
//	go test -c -o bin/cudadev.test ./diffusion/cudadev
//	bin/cudadev.test -test.run '^$' -test.bench DiTStep -test.benchtime 10x -dit.shape zimage-turbo -dit.size 1024
var (
	benchShape = flagpkg.String("dit.shape", "zimage-tiny", "BenchmarkDiTStep: the DiT's shape (zimage-tiny, zimage-turbo)")
	benchSize  = flagpkg.Int("dit.size", 256, "BenchmarkDiTStep: the image side in pixels, a multiple of 16")
	benchCap   = flagpkg.Int("dit.cap", 32, "BenchmarkDiTStep: caption rows (padded to a multiple of 32)")
	benchReps  = flagpkg.Int("dit.reps", 10, "BenchmarkDiTStep: launches a kernel timing averages")
	benchVars  = flagpkg.Bool("dit.variants", false, "BenchmarkDiTStep: also time the GEMM tilings of a cubin built with -DDIT_GEMM_VARIANTS")
)

// gemmVariants are dit.cu's DIT_GEMM_VARIANTS entries (v<WM><WN>_<BK>_<ST>,
// p: fragments double-buffered): warps along M and N (64×64 each), K
// tile, stages.
var gemmVariants = []struct {
	name              string
	wm, wn, bk, stage int
}{{"v24_64_3", 2, 4, 64, 3}, {"v24_64_3p", 2, 4, 64, 3}, {"v22_64_3", 2, 2, 64, 3}, {"v22_64_3p", 2, 2, 64, 3},
	{"v22_32_5", 2, 2, 32, 5}, {"v22_32_5p", 2, 2, 32, 5}, {"v22_32_4p", 2, 2, 32, 4}, {"v22_64_2p", 2, 2, 64, 2}}

// attnVariants are dit.cu's other attention kernels for head dim 128:
// ck_dit_attn_128 (16 query rows a warp, 64 a block) and ck_dit_attn2b_128
// (ck_dit_attn2_128 with key tiles of 32).
var attnVariants = []struct {
	name              string
	rows, keys, qsmem int
}{{"ck_dit_attn_128", 64, 64, 0}, {"ck_dit_attn2b_128", 128, 32, 128}}

// attnGeometry is an attention variant's launch over n rows.
func attnGeometry(rows, keys, qsmem, n, heads, hd int) kernels.Geometry {
	return kernels.Geometry{Grid: [3]uint32{uint32((n + rows - 1) / rows), uint32(heads), 1}, Block: [3]uint32{128, 1, 1},
		Shared: uint32((qsmem + 4*keys) * (hd + 8) * 2)}
}

// BenchmarkDiTStep times one transformer evaluation on the GPU (the
// blocks and the final layer: one upload of the embedded rows, the step's
// CUDA graph, one readback) at the -dit.* shape with random weights,
// every block sharing one block's weights (the device still reads a whole
// block's matrices per block; memory holds one block's). The GPU time of
// a step comes from CUDA events around the graph; then each kernel of a
// block is timed alone (events around -dit.reps launches) and reported
// with its TFLOP/s; and the device memory the runner holds.
func BenchmarkDiTStep(b *testing.B) {
	shape, ok := diffusion.SynthShapes[*benchShape]
	if !ok {
		b.Fatalf("-dit.shape %q: not a known shape", *benchShape)
	}
	if *benchSize%16 != 0 || *benchSize <= 0 || *benchCap < 1 {
		b.Fatalf("-dit.size %d (a multiple of 16), -dit.cap %d", *benchSize, *benchCap)
	}
	dev := cudaDevice(b)
	free0, total, _ := dev.MemInfo()
	s := diffusion.RandomDiTSpec(shape().DiT)
	t0 := time.Now()
	run, err := NewDiTRunner(dev, s, testOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	defer run.Close()
	upload := time.Since(t0)
	side := *benchSize / 16
	in := diffusion.RandomDiTInput(s, side*side, *benchCap, 1)
	rows := in.ImgRows + in.CapRows
	b.Logf("%s on %s: dim %d, ffn %d, %d heads of %d, %d+%d refiners, %d layers; %dx%d: %d image + %d caption rows; weights uploaded in %.1fs",
		*benchShape, dev.Info().Name, s.Dim, s.FFN, s.Heads, s.HeadDim, len(s.NoiseRefiner), len(s.ContextRefiner), len(s.Layers),
		*benchSize, *benchSize, in.ImgRows, in.CapRows, upload.Seconds())
	step := func() {
		if _, err := run.Run(in); err != nil {
			b.Fatal(err)
		}
	}
	step() // capture
	free1, _, _ := dev.MemInfo()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.StopTimer()
	d := run.recs[fmt.Sprintf("%d/%d/%d", in.ImgRows, in.NImg, in.CapRows)]
	ms := timeGPU(b, dev, *benchReps, func() error { return dev.LaunchGraph(d.graph) })
	flop := stepFlops(s, in)
	b.ReportMetric(ms/1e3, "gpu-s/step")
	b.ReportMetric(flop/(ms*1e9), "TFLOP/s")
	b.ReportMetric(float64(d.launches), "launches/step")
	fmt.Printf("dit step: %.2f ms GPU (graph of %d launches), %.1f TFLOP/s over %.1f TFLOP\n", ms, d.launches, flop/(ms*1e9), flop/1e12)
	// The model's weights (every block its own) and what this runner holds.
	perBlock := int64(2 * (4*s.Dim*s.Dim + 3*s.Dim*run.ffn))
	nb := int64(len(s.NoiseRefiner) + len(s.ContextRefiner) + len(s.Layers))
	fmt.Printf("memory: device used %.2f GiB of %.1f after the first step (runner: %.2f GiB weights of one shared block, %.2f GiB activations); a real model's f16 blocks add %.2f GiB\n",
		float64(free0-free1)/(1<<30), float64(total)/(1<<30), float64(run.WeightBytes)/(1<<30),
		float64(run.ActivationBytes(rows, in.NImg))/(1<<30), float64((nb-1)*perBlock)/(1<<30))
	profileBlock(b, dev, run, d)
}

// stepFlops counts a step's multiply-adds ×2: every linear and the
// attention's two products.
func stepFlops(s *diffusion.DiTSpec, in *diffusion.DiTInput) float64 {
	D, F := float64(s.Dim), float64(s.FFN)
	block := func(n float64) float64 {
		return 2*n*D*(4*D+3*F) + 4*n*n*D
	}
	f := 0.0
	for range s.NoiseRefiner {
		f += block(float64(in.ImgRows))
	}
	for range s.ContextRefiner {
		f += block(float64(in.CapRows))
	}
	for range s.Layers {
		f += block(float64(in.ImgRows + in.CapRows))
	}
	return f + 2*float64(in.NImg)*D*float64(s.PatchDim)
}

// timeGPU is the mean milliseconds of reps runs of f between CUDA events.
func timeGPU(b *testing.B, dev driver.Device, reps int, f func() error) float64 {
	if err := f(); err != nil { // warm
		b.Fatal(err)
	}
	e0, err := dev.Record()
	if err != nil {
		b.Fatal(err)
	}
	defer dev.DestroyEvent(e0)
	for range reps {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	e1, err := dev.Record()
	if err != nil {
		b.Fatal(err)
	}
	defer dev.DestroyEvent(e1)
	if err := dev.Sync(); err != nil {
		b.Fatal(err)
	}
	ms, err := dev.Elapsed(e0, e1)
	if err != nil {
		b.Fatal(err)
	}
	return float64(ms) / float64(reps)
}

// profileBlock times each kernel of one layer (the joint rows) alone.
func profileBlock(b *testing.B, dev driver.Device, r *DiTRunner, d *ditRun) {
	s := r.s
	D, FP, n := s.Dim, r.ffn, d.rows
	w := &r.layers[0]
	one := func(name string, flop float64, q func()) {
		ms := timeGPU(b, dev, *benchReps, func() error { q(); return d.err })
		if flop > 0 {
			fmt.Printf("  %-34s %8.3f ms %7.1f TFLOP/s\n", name, ms, flop/(ms*1e9))
		} else {
			fmt.Printf("  %-34s %8.3f ms\n", name, ms)
		}
	}
	gemmName := func(what string, M, N, K int) string { return fmt.Sprintf("gemm %s M%d N%d K%d", what, M, N, K) }
	fmt.Printf("one layer's kernels, %d rows:\n", n)
	one("norm", 0, func() {
		d.launch(kernels.DiTNorm, kernels.DiTRowsLaunch(n), p(d.h), p(d.u), p(w.an1), p(d.mod), driver.I32(D), driver.F32(s.Eps), driver.I32(0))
	})
	one(gemmName("qkv", n, 3*D, D), 2*float64(n)*float64(3*D)*float64(D), func() { d.gemm(kernels.DiTGemmHalf, d.qkv, d.h, w.qkv, 0, n, 3*D, D, 3*D) })
	one("qk-norm+rope", 0, func() {
		d.launch(kernels.DiTQKRope, kernels.DiTQKRopeLaunch(n, s.Heads), p(d.qkv), p(d.rope), p(w.qn), p(w.kn),
			driver.I32(n), driver.I32(s.Heads), driver.I32(s.HeadDim), driver.I32(3*D), driver.F32(s.QKEps))
	})
	one(fmt.Sprintf("attention %d rows, %d heads of %d", n, s.Heads, s.HeadDim), 4*float64(n)*float64(n)*float64(D), func() {
		d.launch(r.attn, kernels.DiTAttnLaunch(n, s.Heads, s.HeadDim), p(d.att), p(d.qkv), driver.I32(n), driver.I32(s.Heads),
			driver.I32(3*D), driver.I32(D), driver.F32(float32(1/math.Sqrt(float64(s.HeadDim)))))
	})
	one(gemmName("o", n, D, D), 2*float64(n)*float64(D)*float64(D), func() { d.gemm(kernels.DiTGemmFloat, d.y, d.att, w.o, 0, n, D, D, D) })
	one("norm+add", 0, func() {
		d.launch(kernels.DiTNormAdd, kernels.DiTRowsLaunch(n), p(d.u), p(d.y), p(w.an2), 0, p(d.h), p(w.fn1), 0, driver.I32(D), driver.F32(s.Eps))
	})
	one(gemmName("w1w3+glu", n, 2*FP, D), 2*float64(n)*float64(2*FP)*float64(D), func() { d.gemm(kernels.DiTGemmGLU, d.g, d.h, w.w13, 0, n, 2*FP, D, FP) })
	one(gemmName("w2", n, D, FP), 2*float64(n)*float64(D)*float64(FP), func() { d.gemm(kernels.DiTGemmFloat, d.y, d.g, w.w2, 0, n, D, FP, D) })
	if !*benchVars {
		return
	}
	const iters = 4096
	blocks := 8 * dev.Info().SMs
	one("mma.sync peak", float64(blocks)*8*iters*8*4096, func() {
		d.launch("ck_dit_mma_peak", kernels.Geometry{Grid: [3]uint32{uint32(blocks), 1, 1}, Block: [3]uint32{256, 1, 1}}, p(d.y), driver.I32(iters))
	})
	for _, v := range attnVariants {
		g := attnGeometry(v.rows, v.keys, v.qsmem, n, s.Heads, s.HeadDim)
		one(v.name, 4*float64(n)*float64(n)*float64(D), func() {
			d.launch(v.name, g, p(d.att), p(d.qkv), driver.I32(n), driver.I32(s.Heads), driver.I32(3*D), driver.I32(D),
				driver.F32(float32(1/math.Sqrt(float64(s.HeadDim)))))
		})
	}
	fmt.Println("GEMM tilings (f16 out):")
	scratch := d.buf(int64(2 * n * 2 * FP))
	for _, sh := range []struct {
		what string
		a, w driver.Ptr
		N, K int
	}{{"qkv", d.h, w.qkv, 3 * D, D}, {"o", d.att, w.o, D, D}, {"w1w3", d.h, w.w13, 2 * FP, D}, {"w2", d.g, w.w2, D, FP}} {
		for _, v := range gemmVariants {
			name := v.name
			bm, bn := 64*v.wm, 64*v.wn
			g := kernels.Geometry{Grid: [3]uint32{uint32((n + bm - 1) / bm), uint32((sh.N + bn - 1) / bn), 1},
				Block: [3]uint32{uint32(32 * v.wm * v.wn), 1, 1}, Shared: uint32(v.stage * (bm + bn) * v.bk * 2)}
			y := scratch
			one(gemmName(sh.what+" "+name, n, sh.N, sh.K), 2*float64(n)*float64(sh.N)*float64(sh.K), func() {
				d.launch(kernels.DiTGemmPrefix+name, g, p(y), p(sh.a), p(sh.w), 0, driver.I32(n), driver.I32(sh.N), driver.I32(sh.K), driver.I32(sh.N))
			})
		}
	}
}

package device

import (
	flagpkg "flag"
	"fmt"
	"testing"
	"time"

	"github.com/cortiq/cortiq/diffusion"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// BenchmarkDiTStep's shape, set on the test binary's command line, e.g.
//
//	go test -c -o bin/dit.test ./diffusion/device
//	bin/dit.test -test.run '^$' -test.bench DiTStep -test.benchtime 5x -dit.shape zimage-turbo -dit.size 1024
var (
	benchShape     = flagpkg.String("dit.shape", "zimage-tiny", "BenchmarkDiTStep: the DiT's shape (zimage-tiny, zimage-turbo)")
	benchSize      = flagpkg.Int("dit.size", 256, "BenchmarkDiTStep: the image side in pixels, a multiple of 16")
	benchCap       = flagpkg.Int("dit.cap", 32, "BenchmarkDiTStep: caption rows (padded to a multiple of 32)")
	benchCodec     = flagpkg.String("dit.codec", "f32", "BenchmarkDiTStep: block weights on the device (f32, f16, q8_0, q4_0)")
	benchBatch     = flagpkg.Int("dit.batch", 1, "BenchmarkDiTStep: inputs per step (2: classifier-free guidance's batch)")
	benchGemm      = flagpkg.String("dit.gemm", "", "BenchmarkDiTStep: the GEMM tiling (empty: the prefill's; large: shaders.GemmLarge)")
	benchSplit     = flagpkg.Int("dit.split", 0, "BenchmarkDiTStep: threads per attention row (0: the kernel's choice)")
	benchNaiveConv = flagpkg.Bool("vae.naive", false, "BenchmarkVAEDecode: convolutions on the one-invocation-per-output kernel")
	benchProfile   = flagpkg.Bool("dit.profile", false, "BenchmarkDiTStep: time every dispatch and print the GPU time per kernel class")
)

// BenchmarkDiTStep times one transformer evaluation on the device (the
// blocks and the final layer: one upload of the embedded rows, one
// submission, one readback) at a shape given by the -dit.* flags, with
// random weights: every block shares one block's weights (the device
// still reads a whole block's matrices from memory per block, which no
// cache holds at real sizes; memory use is one block's, not the model's).
// It reports seconds per step and dispatches per step; -dit.profile adds
// the GPU time per kernel class (a profiled step is slower: one pass per
// dispatch).
func BenchmarkDiTStep(b *testing.B) {
	shape, ok := diffusion.SynthShapes[*benchShape]
	if !ok {
		b.Fatalf("-dit.shape %q: not a known shape", *benchShape)
	}
	codec, err := tensor.ParseCodec(*benchCodec)
	if err != nil {
		b.Fatal(err)
	}
	if *benchSize%16 != 0 || *benchSize <= 0 || *benchBatch < 1 || *benchCap < 1 {
		b.Fatalf("-dit.size %d (a multiple of 16), -dit.batch %d, -dit.cap %d", *benchSize, *benchBatch, *benchCap)
	}
	var d *gpu.Device
	if *benchProfile {
		if d, err = gpu.Open(gpu.Options{Profile: gpu.Profile{Timestamps: true}}); err != nil {
			b.Skipf("no WebGPU adapter: %v", err)
		}
		defer d.Close()
	} else {
		d = testDevice(b)
	}
	c := shape().DiT
	s := diffusion.RandomDiTSpec(c)
	t0 := time.Now()
	opts := DiTOptions{Codec: codec, AttnSplit: *benchSplit}
	switch *benchGemm {
	case "":
	case "large":
		opts.Gemm = shaders.GemmLarge()
	default:
		b.Fatalf("-dit.gemm %q: empty or large", *benchGemm)
	}
	run, err := NewDiTRunner(d, s, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer run.Close()
	upload := time.Since(t0)
	side := *benchSize / 16 // patches of 2x2 latent pixels, 8 pixels each
	ins := make([]*diffusion.DiTInput, *benchBatch)
	for i := range ins {
		ins[i] = diffusion.RandomDiTInput(s, side*side, *benchCap, uint64(i+1))
	}
	rows := (ins[0].ImgRows + ins[0].CapRows) * len(ins)
	b.Logf("%s on %s: dim %d, ffn %d, %d heads of %d, %d+%d refiners, %d layers; %dx%d (%d image + %d caption rows) x %d; %s weights uploaded in %.1fs",
		*benchShape, d.Info().Name, s.Dim, s.FFN, s.Heads, s.HeadDim, len(s.NoiseRefiner), len(s.ContextRefiner), len(s.Layers),
		*benchSize, *benchSize, ins[0].ImgRows, ins[0].CapRows, len(ins), codec, upload.Seconds())
	step := func() {
		if _, err := run.RunBatch(ins); err != nil {
			b.Fatal(err)
		}
	}
	step() // pipelines compiled, buffers touched
	if *benchProfile {
		d.ProfileReport() // drop the warm-up's
	}
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.StopTimer()
	b.ReportMetric(float64(run.dispatches), "dispatches/step")
	b.ReportMetric(float64(rows), "rows")
	if *benchProfile {
		fmt.Print(d.ProfileReport())
	}
}

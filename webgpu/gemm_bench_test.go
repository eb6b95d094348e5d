package webgpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// BenchmarkGemm times the tiled prefill GEMM (several tilings; "default" is
// shaders.Gemm) against the matmul kernel's prefill variants on llama-1b
// shapes with 512 tokens. A submit plus readback costs a millisecond or
// two, so each iteration times reps dependent dispatches in one submit and
// subtracts an empty submit's round trip.
func BenchmarkGemm(b *testing.B) {
	d := testDevice(b)
	shapes := [][2]int{{2048, 2048}, {3072, 2048}, {16384, 2048}, {2048, 8192}}
	ntok, reps := 512, 20
	// Longer chains (CORTIQ_GEMM_BENCH_REPS) show sustained rates: short
	// bursts between readbacks may run at boost clocks.
	if n, err := strconv.Atoi(os.Getenv("CORTIQ_GEMM_BENCH_REPS")); err == nil && n >= 1 && n <= 1000 {
		reps = n
	}
	if d.Info().Type == "cpu" || testing.Short() {
		shapes, ntok, reps = [][2]int{{256, 512}}, 64, 2
	}
	type variant struct {
		name   string
		src    func(c tensor.Codec) (string, error)
		grid   func(rows int) (x, y, z uint32)
		tiling shaders.GemmTiling
	}
	var vs []variant
	for _, g := range []shaders.GemmTiling{
		{}, // shaders.Gemm
		{Rows: 64, Tokens: 64, K: 16, ThreadRows: 4, ThreadTokens: 8, Unroll: true},
		{Rows: 64, Tokens: 64, K: 16, ThreadRows: 4, ThreadTokens: 8, Unroll: true, Double: true},
		{Rows: 64, Tokens: 64, K: 16, ThreadRows: 4, ThreadTokens: 4, Unroll: true, Double: true},
		{Rows: 64, Tokens: 64, K: 16, ThreadRows: 8, ThreadTokens: 8, Unroll: true, Double: true},
		{Rows: 128, Tokens: 64, K: 16, ThreadRows: 4, ThreadTokens: 8, Unroll: true},
		{Rows: 64, Tokens: 128, K: 16, ThreadRows: 4, ThreadTokens: 8, Unroll: true},
		shaders.GemmLarge(),
		{Rows: 128, Tokens: 128, K: 32, ThreadRows: 8, ThreadTokens: 8, Unroll: true, Shared: 32768},
		{Rows: 128, Tokens: 64, K: 32, ThreadRows: 8, ThreadTokens: 8, Unroll: true, Shared: 32768},
		{Rows: 64, Tokens: 64, K: 64, ThreadRows: 4, ThreadTokens: 8, Unroll: true, Shared: 32768},
		{Rows: 64, Tokens: 128, K: 32, ThreadRows: 4, ThreadTokens: 8, Unroll: true, Shared: 32768},
	} {
		if g.Shared > int(d.Limits().MaxComputeWorkgroupStorageSize) {
			continue
		}
		g := g
		name := fmt.Sprintf("gemm-%dx%dk%d-%dx%d", g.Rows, g.Tokens, g.K, g.ThreadRows, g.ThreadTokens)
		if g.Unroll {
			name += "u"
		}
		if g.Double {
			name += "d"
		}
		src := func(c tensor.Codec) (string, error) { return shaders.GemmTiled(c, g) }
		grid := func(rows int) (uint32, uint32, uint32) {
			x, y := matmulGrid(rows, g.Rows)
			return x, y, uint32((ntok + g.Tokens - 1) / g.Tokens)
		}
		if g.Rows == 0 {
			name, src = "gemm-default", shaders.Gemm
			grid = func(rows int) (uint32, uint32, uint32) { return gemmGrid(tensor.Q4_0, rows, ntok) }
		}
		vs = append(vs, variant{name: name, src: src, grid: grid, tiling: g})
	}
	for _, tr := range [][2]int{{4, 8}} {
		tb, rr := tr[0], tr[1]
		vs = append(vs, variant{
			name: fmt.Sprintf("matmul-tb%d-r%d", tb, rr),
			src:  func(c tensor.Codec) (string, error) { return shaders.MatmulRows(c, tb, rr) },
			grid: func(rows int) (uint32, uint32, uint32) {
				x, y := matmulGrid(rows, rr)
				return x, y, uint32((ntok + tb - 1) / tb)
			},
		})
	}
	codecs := []tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.F16, tensor.F32}
	if os.Getenv("CORTIQ_GEMM_BENCH_Q4") == "1" {
		codecs = codecs[:1]
	}
	for _, c := range codecs {
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			var qbytes, sbytes int
			switch c {
			case tensor.Q4_0:
				qbytes, sbytes = rows*cols/2, rows*cols/16
			case tensor.Q8_0:
				qbytes, sbytes = rows*cols, rows*cols/16
			case tensor.F16:
				qbytes = rows * cols * 2
			default:
				qbytes = rows * cols * 4
			}
			r := rand.New(rand.NewPCG(1, 2))
			data := benchWeightBytes(r, (qbytes+sbytes+15)&^15)
			wb, err := d.NewStorage("w", uint64(len(data)))
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Write(wb, 0, data); err != nil {
				b.Fatal(err)
			}
			xb, _ := d.NewStorage("x", uint64(4*cols*ntok))
			d.Write(xb, 0, gpu.F32Bytes(randVec(r, cols*ntok, 1)))
			ob, _ := d.NewStorage("o", uint64(4*rows*ntok))
			zb, _ := d.NewStorage("z", uint64(4*rows))
			ub, _ := d.NewUniform("p", shaders.Pack(shaders.MatmulParams{Rows: u32(rows), Cols: u32(cols), SOff: uint32(qbytes / 4), Alpha: 1, OutStride: u32(rows)}))
			sb, _ := d.NewStorage("s", 32)
			d.Write(sb, 0, gpu.U32Bytes([]uint32{0, uint32(ntok), 0, 1, 0, 0, 0, 0}))
			for _, v := range vs {
				b.Run(fmt.Sprintf("%s/%dx%d/%s", c, rows, cols, v.name), func(b *testing.B) {
					src, err := v.src(c)
					if err != nil {
						b.Fatal(err)
					}
					key := "bench/" + v.name + "/" + c.String()
					p, err := d.Pipeline(key, src, kindsMatmul)
					if err != nil {
						b.Fatal(err)
					}
					g, err := d.BindGroup(p, key, gpu.Whole(ub), gpu.Whole(sb), gpu.Whole(wb), gpu.Whole(xb), gpu.Whole(ob), gpu.Whole(zb))
					if err != nil {
						b.Fatal(err)
					}
					defer g.Release()
					gx, gy, gz := v.grid(rows)
					ds := make([]gpu.Dispatch, reps)
					for i := range ds {
						ds[i] = gpu.Dispatch{P: p, G: g, X: gx, Y: gy, Z: gz}
					}
					sec := usPerDispatch(b, d, sb, ds, 3) / 1e6
					b.ReportMetric(sec*1e6, "us/dispatch")
					b.ReportMetric(2*float64(rows)*float64(cols)*float64(ntok)/sec/1e12, "TFLOPs")
				})
			}
			for _, buf := range []*gpu.Buffer{wb, xb, ob, zb, ub, sb} {
				buf.Release()
			}
		}
	}
}

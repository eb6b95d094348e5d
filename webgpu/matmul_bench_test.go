package webgpu

import (
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// BenchmarkMatmulKernel times the matmul kernel alone: reps dependent
// dispatches of one weight per submit, llama-1b shapes, several row blocks.
// The MB/s column is weight bytes read per second (for tb > 1 the weight is
// read once per token block, so it is not the DRAM rate).
func BenchmarkMatmulKernel(b *testing.B) {
	d := testDevice(b)
	shapes := [][2]int{{64, 2048}, {3072, 2048}, {16384, 2048}, {2048, 8192}, {128256, 2048}}
	if d.Info().Type == "cpu" || testing.Short() {
		shapes = [][2]int{{256, 512}}
	}
	for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.F32} {
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			var qbytes, sbytes int
			switch c {
			case tensor.Q4_0:
				qbytes, sbytes = rows*cols/2, rows*cols/16
			case tensor.Q8_0:
				qbytes, sbytes = rows*cols, rows*cols/16
			default:
				qbytes = rows * cols * 4
			}
			data := benchWeightBytes(rand.New(rand.NewPCG(1, 2)), (qbytes+sbytes+15)&^15)
			wb, err := d.NewStorage("w", uint64(len(data)))
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Write(wb, 0, data); err != nil {
				b.Fatal(err)
			}
			const ntok = 512
			xb, _ := d.NewStorage("x", uint64(4*cols*ntok))
			ob, _ := d.NewStorage("o", uint64(4*rows*ntok))
			zb, _ := d.NewStorage("z", uint64(4*rows))
			for _, v := range [][2]int{{1, 1}, {1, 2}, {1, 4}, {1, 8}, {8, 4}, {4, 8}, {16, 2}, {12, 4}} {
				tb, rr := v[0], v[1]
				if c == tensor.F32 && (tb > 1 || rr == 2 || rr == 8) {
					continue
				}
				n := 1
				if tb > 1 {
					n = ntok
				}
				b.Run(fmt.Sprintf("%s/%dx%d/tb%d/r%d", c, rows, cols, tb, rr), func(b *testing.B) {
					src, err := shaders.MatmulRows(c, tb, rr)
					if err != nil {
						b.Fatal(err)
					}
					key := fmt.Sprintf("matmul/%s/tb%d/r%d", c, tb, rr)
					p, err := d.Pipeline(key, src, kindsMatmul)
					if err != nil {
						b.Fatal(err)
					}
					ub, _ := d.NewUniform("p", shaders.Pack(shaders.MatmulParams{Rows: u32(rows), Cols: u32(cols), SOff: uint32(qbytes / 4), Alpha: 1, OutStride: u32(rows)}))
					sb, _ := d.NewStorage("s", 32)
					d.Write(sb, 0, gpu.U32Bytes([]uint32{0, uint32(n), 0, 1, 0, 0, 0, 0}))
					g, err := d.BindGroup(p, key, gpu.Whole(ub), gpu.Whole(sb), gpu.Whole(wb), gpu.Whole(xb), gpu.Whole(ob), gpu.Whole(zb))
					if err != nil {
						b.Fatal(err)
					}
					gx, gy := matmulGrid(rows, rr)
					reps := 50
					if tb > 1 {
						reps = 5
					}
					ds := make([]gpu.Dispatch, reps)
					for i := range ds {
						ds[i] = gpu.Dispatch{P: p, G: g, X: gx, Y: gy, Z: uint32((n + tb - 1) / tb)}
					}
					b.SetBytes(int64(len(data)) * int64(reps))
					us := usPerDispatch(b, d, sb, ds, 1)
					b.ReportMetric(us, "us/dispatch")
					b.ReportMetric(float64(len(data))/us/1e3, "GB/s")
					if n > 1 {
						b.ReportMetric(2*float64(rows*cols*n)/us/1e6, "TFLOPs")
					}
				})
			}
		}
	}
}

// BenchmarkDispatchFloor times a chain of dependent one-workgroup
// dispatches (the advance kernel): the fixed cost every kernel pays.
func BenchmarkDispatchFloor(b *testing.B) {
	d := testDevice(b)
	p, err := d.Pipeline("advance", mustSource(b, shaders.Advance), kindsAdvance)
	if err != nil {
		b.Fatal(err)
	}
	sb, _ := d.NewStorage("s", 64)
	g, err := d.BindGroup(p, "advance", gpu.Whole(sb))
	if err != nil {
		b.Fatal(err)
	}
	// The independent variant writes a buffer of its own per dispatch, so
	// no barrier separates them: the difference is the barrier's cost.
	const n = 200
	var gs []*wgpu.BindGroup
	for i := 0; i < n; i++ {
		ib, _ := d.NewStorage("s", 64)
		gi, err := d.BindGroup(p, fmt.Sprint("advance", i), gpu.Whole(ib))
		if err != nil {
			b.Fatal(err)
		}
		gs = append(gs, gi)
	}
	for _, reps := range []int{1, 50, n, -n} {
		b.Run(fmt.Sprint(reps), func(b *testing.B) {
			ds := make([]gpu.Dispatch, max(reps, -reps))
			for i := range ds {
				ds[i] = gpu.Dispatch{P: p, G: g, X: 1, Y: 1, Z: 1}
				if reps < 0 {
					ds[i].G = gs[i]
				}
			}
			var host time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := d.Run(nil, ds, nil); err != nil {
					b.Fatal(err)
				}
				host += time.Since(t0)
				if _, err := d.ReadBuffer(sb, 16); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ds)), "us/dispatch")
			b.ReportMetric(float64(host.Microseconds())/float64(b.N*len(ds)), "us-host-encode/dispatch")
		})
	}
}

func mustSource(b *testing.B, name string) string {
	src, err := shaders.Source(name)
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// benchWeightBytes is n bytes of random weight data that decodes to finite
// values in every codec: each 16-bit half is a finite f16 (and each 32-bit
// word a small f32).
func benchWeightBytes(r *rand.Rand, n int) []byte {
	data := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64() & 0x3bff3bff3bff3bff
		for k := 0; k < 8; k++ {
			data[i+k] = byte(v >> (8 * k))
		}
	}
	return data
}

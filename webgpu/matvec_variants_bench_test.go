package webgpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// BenchmarkMatvecVariants times the decode matvec's variants as the graph
// runs them, over distinct weights (from HBM, as in decode) and chained:
// plain, with the RMSNorm of x fused in (MatmulRowsNorm), with the gated
// activation of interleaved gate/up rows (mode 2), and both.
// CORTIQ_MV_BENCH_CODEC picks the weights' codec (q4_0 by default; any
// codec the device reads, in its device layout: scripts/bench-wgsl-codecs.sh
// runs the GGUF types held as planes beside q4_0); GB/s counts the
// weight's device bytes.
func BenchmarkMatvecVariants(b *testing.B) {
	d := testDevice(b)
	shapes := [][2]int{{3072, 2048}, {2048, 2048}, {16384, 2048}, {2048, 8192}, {128256, 2048}}
	nbuf := 40
	if d.Info().Type == "cpu" || testing.Short() {
		shapes, nbuf = [][2]int{{256, 512}}, 4
	}
	r := rand.New(rand.NewPCG(3, 4))
	pat := benchWeightBytes(r, 1<<20)
	codec := tensor.Q4_0
	if c, err := tensor.ParseCodec(os.Getenv("CORTIQ_MV_BENCH_CODEC")); err == nil {
		codec = c
	}
	for _, sh := range shapes {
		rows, cols := sh[0], sh[1]
		wbytes, soff, err := benchLayout(codec, rows, cols)
		if err != nil {
			b.Fatal(err)
		}
		n := min(nbuf, max(4, (200<<20)/wbytes))
		var wbs []*gpu.Buffer
		for i := 0; i < n; i++ {
			wb, err := d.NewStorage("w", uint64(wbytes))
			if err != nil {
				b.Fatal(err)
			}
			for off := 0; off < wbytes; off += len(pat) {
				if err := d.Write(wb, uint64(off), pat[:min(len(pat), wbytes-off)]); err != nil {
					b.Fatal(err)
				}
			}
			wbs = append(wbs, wb)
		}
		d.Flush()
		xb, _ := d.NewStorage("x", uint64(4*cols))
		d.Write(xb, 0, gpu.F32Bytes(randVec(r, cols, 1)))
		nwb, _ := d.NewStorage("nw", uint64(4*cols))
		d.Write(nwb, 0, gpu.F32Bytes(randVec(r, cols, 1)))
		ob, _ := d.NewStorage("o", uint64(4*rows))
		zb, _ := d.NewStorage("z", uint64(4*rows))
		sb, _ := d.NewStorage("s", 32)
		d.Write(sb, 0, gpu.U32Bytes([]uint32{0, 1, 0, 1, 0, 0, 0, 0}))
		type variant struct {
			name   string
			norm   bool
			mode   int
			rows   int                 // row-blocked kernel (MatmulRows)
			staged shaders.MatvecShape // staged kernel (Matvec) when rows is 0
		}
		var vs []variant
		for _, k := range []struct {
			name string
			norm bool
			mode int
		}{{"plain", false, 0}, {"norm", true, 0}, {"act", false, 2}, {"norm+act", true, 2}} {
			if rows > 100000 && k.name != "plain" { // the lm head: a plain matvec
				continue
			}
			vs = append(vs, variant{k.name, k.norm, k.mode, DefaultTuning().MVRows, shaders.MatvecShape{}})
			for _, sh := range [][3]int{{4, 1, 4}, {4, 1, 8}, {4, 2, 2}, {4, 2, 4}, {4, 4, 1}, {4, 4, 2}, {4, 4, 4}, {2, 4, 4}, {8, 1, 4}, {8, 2, 2}} {
				sh := shaders.MatvecShape{Rows: sh[0], Sets: sh[1], Groups: sh[2]}
				if shaders.MatvecSharedBytes(sh, cols) > int(d.Limits().MaxComputeWorkgroupStorageSize) {
					continue
				}
				vs = append(vs, variant{fmt.Sprintf("%s-staged-r%ds%dg%d", k.name, sh.Rows, sh.Sets, sh.Groups), k.norm, k.mode, 0, sh})
			}
		}
		for _, v := range vs {
			b.Run(fmt.Sprintf("%s/%dx%d/%s", codec, rows, cols, v.name), func(b *testing.B) {
				outStride := rows
				if v.mode == 2 {
					outStride = rows / 2
				}
				ub, _ := d.NewUniform("p", shaders.Pack(shaders.MatmulParams{Rows: u32(rows), Cols: u32(cols), SOff: soff, Mode: u32(v.mode), Alpha: 1, OutStride: u32(outStride), Eps: 1e-5}))
				var src, key string
				var err error
				kinds := kindsMatmul
				if v.norm {
					kinds = kindsMatmulNorm
				}
				rpw := v.rows
				switch {
				case v.rows == 0:
					src, err = shaders.Matvec(codec, v.staged, cols, v.norm)
					key, rpw = fmt.Sprintf("matvec/%s/%v/%d/%v", codec, v.staged, cols, v.norm), v.staged.RowsPerWorkgroup()
				case v.norm:
					src, err = shaders.MatmulRowsNorm(codec, 1, v.rows)
					key = fmt.Sprintf("matmul-norm/%s/tb1/r%d", codec, v.rows)
				default:
					src, err = shaders.MatmulRows(codec, 1, v.rows)
					key = fmt.Sprintf("matmul/%s/tb1/r%d", codec, v.rows)
				}
				if err != nil {
					b.Fatal(err)
				}
				p, err := d.Pipeline(key, src, kinds)
				if err != nil {
					b.Fatal(err)
				}
				gx, gy := matmulGrid(rows, rpw)
				var ds []gpu.Dispatch
				var gs []*wgpu.BindGroup
				for _, wb := range wbs {
					binds := []gpu.Binding{gpu.Whole(ub), gpu.Whole(sb), gpu.Whole(wb), gpu.Whole(xb), gpu.Whole(ob), gpu.Whole(zb)}
					if v.norm {
						binds = append(binds, gpu.Whole(nwb))
					}
					g, err := d.BindGroup(p, key, binds...)
					if err != nil {
						b.Fatal(err)
					}
					gs = append(gs, g)
					ds = append(ds, gpu.Dispatch{P: p, G: g, X: gx, Y: gy, Z: 1})
				}
				us := usPerDispatch(b, d, sb, repeat(ds, 10), 1)
				b.ReportMetric(us, "us/matvec")
				b.ReportMetric(float64(wbytes)/us/1e3, "GB/s")
				for _, g := range gs {
					g.Release()
				}
			})
		}
	}
}

// benchLayout is the device bytes of a rows x cols weight of codec c
// (rounded up to 16) and its soff: where a planar codec's scale plane or an
// IQ codec's grid starts, in u32 words.
func benchLayout(c tensor.Codec, rows, cols int) (int, uint32, error) {
	dc, err := deviceCodec(c)
	if err != nil {
		return 0, 0, err
	}
	if dc != c || cols%shaders.ChunkOf(c) != 0 {
		return 0, 0, fmt.Errorf("%s is not read in place at %d columns", c, cols)
	}
	n := int(deviceBytes(c, rows, cols))
	var soff uint32
	d := shaders.DeviceCodecOf(c)
	switch {
	case d.Planar:
		soff = uint32(rows * (cols / d.Elems) * d.QBytes / 4)
	case d.Grid != nil:
		rb, err := deviceRowBytes(c, cols)
		if err != nil {
			return 0, 0, err
		}
		soff = uint32(rows * rb / 4)
	}
	return (n + 15) &^ 15, soff, nil
}

// repeat is ds n times over: chains long enough that the GPU time dwarfs
// the noise of the submit and readback they are timed against.
func repeat(ds []gpu.Dispatch, n int) []gpu.Dispatch {
	var out []gpu.Dispatch
	for range n {
		out = append(out, ds...)
	}
	return out
}

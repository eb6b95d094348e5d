package webgpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// BenchmarkMatvecFloor compares the decode matvec with stripped-down
// kernels over the same bindings and memory pattern (3072×2048 q4_0 sized),
// to locate a fixed per-dispatch cost inside the kernel.
func BenchmarkMatvecFloor(b *testing.B) {
	d := testDevice(b)
	const rows, cols = 3072, 2048
	wbytes := rows * cols / 2 * 9 / 8
	wb, _ := d.NewStorage("w", uint64(wbytes))
	d.Write(wb, 0, make([]byte, wbytes))
	xb, _ := d.NewStorage("x", 4*cols)
	ob, _ := d.NewStorage("o", 4*rows)
	zb, _ := d.NewStorage("z", 4*rows)
	sb, _ := d.NewStorage("s", 32)
	d.Write(sb, 0, gpu.U32Bytes([]uint32{0, 1, 0, 1, 0, 0, 0, 0}))
	ub, _ := d.NewUniform("p", shaders.Pack(shaders.MatmulParams{Rows: rows, Cols: cols, SOff: uint32(rows * cols / 8), Alpha: 1, OutStride: rows}))
	head := shaders.MatmulIO() + `
var<workgroup> red: array<f32, 64>;
`
	kernels := map[string]string{
		// One 16-byte weight load per thread and row, a shared-memory sum.
		"stream-r4": head + `
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wg.x * 4u;
    var acc = 0.0;
    for (var r = 0u; r < 4u; r++) {
        let q = w[((row0 + r) * p.cols) / 32u + lid.x];
        acc += f32(q.x & 255u) * x[lid.x].x;
    }
    red[lid.x] = acc;
    workgroupBarrier();
    if (lid.x == 0u) {
        var s = 0.0;
        for (var i = 0u; i < 64u; i++) { s += red[i]; }
        out[row0] = s;
    }
}`,
		// The same without the workgroup reduction.
		"stream-noreduce": head + `
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wg.x * 4u;
    var acc = 0.0;
    for (var r = 0u; r < 4u; r++) {
        let q = w[((row0 + r) * p.cols) / 32u + lid.x];
        acc += f32(q.x & 255u) * x[lid.x].x;
    }
    if (acc == 12345.0) { out[row0] = acc; }
}`,
		// Only the output write.
		"write-only": head + `
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    if (lid.x < 4u) { out[wg.x * 4u + lid.x] = f32(step[1]); }
}`,
	}
	real, err := shaders.MatmulRows(tensor.Q4_0, 1, 4)
	if err != nil {
		b.Fatal(err)
	}
	kernels["real-q4_0-r4"] = real
	realF32, _ := shaders.MatmulRows(tensor.F32, 1, 4)
	kernels["real-f32-r4"] = realF32
	for _, name := range []string{"write-only", "stream-noreduce", "stream-r4", "real-q4_0-r4", "real-f32-r4"} {
		b.Run(name, func(b *testing.B) {
			p, err := d.Pipeline("floor/"+name, kernels[name], kindsMatmul)
			if err != nil {
				b.Fatal(err)
			}
			g, err := d.BindGroup(p, "floor/"+name, gpu.Whole(ub), gpu.Whole(sb), gpu.Whole(wb), gpu.Whole(xb), gpu.Whole(ob), gpu.Whole(zb))
			if err != nil {
				b.Fatal(err)
			}
			for _, reps := range []int{1, 100} {
				ds := make([]gpu.Dispatch, reps)
				for i := range ds {
					ds[i] = gpu.Dispatch{P: p, G: g, X: rows / 4, Y: 1, Z: 1}
				}
				b.ReportMetric(usPerDispatch(b, d, sb, ds, 1), fmt.Sprintf("us/dispatch@%d", reps))
			}
		})
	}
}

// BenchmarkRoundTrip splits one submit-and-read-back into its phases: host
// encoding, the submit call, and the wait for the mapped result, for an
// empty command buffer (a 16-byte copy) and for n trivial dispatches.
func BenchmarkRoundTrip(b *testing.B) {
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
	st, _ := d.NewStaging("st", 16)
	for _, n := range []int{0, 150} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ds := make([]gpu.Dispatch, n)
			for i := range ds {
				ds[i] = gpu.Dispatch{P: p, G: g, X: 1, Y: 1, Z: 1}
			}
			var tRun, tWait time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := d.Run(nil, ds, []gpu.Copy{{Src: sb, Dst: st, Size: 16}}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := d.Read(st, 16); err != nil {
					b.Fatal(err)
				}
				tRun += t1.Sub(t0)
				tWait += time.Since(t1)
			}
			b.ReportMetric(float64(tRun.Microseconds())/float64(b.N), "us-encode+submit")
			b.ReportMetric(float64(tWait.Microseconds())/float64(b.N), "us-wait+map")
		})
	}
}

// BenchmarkMatvecCold times decode matvecs the way a decode step meets
// them: each dispatch reads a different weight buffer, so the weights come
// from device memory, not from the L2 cache a repeated dispatch hits.
func BenchmarkMatvecCold(b *testing.B) {
	d := testDevice(b)
	shapes := [][2]int{{3072, 2048}, {16384, 2048}, {2048, 8192}}
	nbuf := 40
	if d.Info().Type == "cpu" || testing.Short() {
		shapes, nbuf = [][2]int{{256, 512}}, 4
	}
	for _, sh := range shapes {
		rows, cols := sh[0], sh[1]
		wbytes := rows * cols / 2 * 9 / 8
		n := min(nbuf, max(4, (160<<20)/wbytes))
		var wbs []*gpu.Buffer
		for i := 0; i < n; i++ {
			wb, err := d.NewStorage("w", uint64(wbytes))
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Write(wb, 0, make([]byte, wbytes)); err != nil {
				b.Fatal(err)
			}
			wbs = append(wbs, wb)
		}
		d.Flush()
		xb, _ := d.NewStorage("x", uint64(4*cols))
		ob, _ := d.NewStorage("o", uint64(4*rows))
		zb, _ := d.NewStorage("z", uint64(4*rows))
		sb, _ := d.NewStorage("s", 32)
		d.Write(sb, 0, gpu.U32Bytes([]uint32{0, 1, 0, 1, 0, 0, 0, 0}))
		ub, _ := d.NewUniform("p", shaders.Pack(shaders.MatmulParams{Rows: u32(rows), Cols: u32(cols), SOff: uint32(rows * cols / 8), Alpha: 1, OutStride: u32(rows)}))
		type variant struct {
			name    string
			w, rpt  int // stream: threads per workgroup, rows per thread
			persist int // stream: workgroups that loop over the row groups (0: one per group)
			r       int // the real kernel's rows per workgroup
		}
		vs := []variant{{"real-r4", 0, 0, 0, 4}, {"real-r8", 0, 0, 0, 8},
			{"stream-w64-r4", 64, 4, 0, 0}, {"stream-w64-r16", 64, 16, 0, 0}, {"stream-w256-r1", 256, 1, 0, 0},
			{"stream-w256-r4", 256, 4, 0, 0}, {"stream-w128-r8", 128, 8, 0, 0},
			{"stream-w256-r4-p1056", 256, 4, 1056, 0}, {"stream-w256-r2-p528", 256, 2, 528, 0}}
		for _, v := range vs {
			b.Run(fmt.Sprintf("q4_0/%dx%d/%s", rows, cols, v.name), func(b *testing.B) {
				var src, key string
				var err error
				r := v.r
				if v.r > 0 {
					src, err = shaders.MatmulRows(tensor.Q4_0, 1, v.r)
					if err != nil {
						b.Fatal(err)
					}
					key = fmt.Sprintf("matmul/q4_0/tb1/r%d", r)
				} else {
					src, key = streamKernel(v.w, v.rpt, v.persist > 0), "bench/"+v.name
					r = v.w / 64 * v.rpt
				}
				p, err := d.Pipeline(key, src, kindsMatmul)
				if err != nil {
					b.Fatal(err)
				}
				var ds []gpu.Dispatch
				gx, gy := matmulGrid(rows, r)
				if v.persist > 0 {
					gx, gy = uint32(v.persist), 1
				}
				for _, wb := range wbs {
					g, err := d.BindGroup(p, key, gpu.Whole(ub), gpu.Whole(sb), gpu.Whole(wb), gpu.Whole(xb), gpu.Whole(ob), gpu.Whole(zb))
					if err != nil {
						b.Fatal(err)
					}
					ds = append(ds, gpu.Dispatch{P: p, G: g, X: gx, Y: gy, Z: 1})
				}
				us := usPerDispatch(b, d, sb, ds, 1)
				b.ReportMetric(us, "us/dispatch")
				b.ReportMetric(float64(wbytes)/us/1e3, "GB/s")
			})
		}
	}
}

// streamKernel is the floor of a q4_0 matvec's memory pattern: 64 threads
// per row read its 16-byte blocks, each thread rpt rows (independent
// loads), w threads per workgroup; persist makes a fixed grid loop over the
// row groups.
func streamKernel(w, rpt int, persist bool) string {
	loop := "let g = wg.x + wg.y * nwg.x;"
	end := ""
	if persist {
		loop = "for (var g = wg.x; g < (p.rows + RPW - 1u) / RPW; g += nwg.x) {"
		end = "}"
	}
	return shaders.MatmulIO() + fmt.Sprintf(`
const W: u32 = %du;
const RPT: u32 = %du;
const RPW: u32 = %du;
var<workgroup> red: array<f32, W>;
@compute @workgroup_size(W)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let nb = p.cols / 32u;
    %s
    let row0 = g * RPW + lid.x / 64u;
    var acc = 0.0;
    for (var j = lid.x %% 64u; j < nb; j += 64u) {
        var q: array<vec4<u32>, RPT>;
        for (var r = 0u; r < RPT; r++) {
            q[r] = w[min(row0 + r * (W / 64u), p.rows - 1u) * nb + j];
        }
        let xv = x[j].x;
        for (var r = 0u; r < RPT; r++) {
            acc += f32(q[r].x & 255u) * xv;
        }
    }
    red[lid.x] = acc;
    workgroupBarrier();
    if (lid.x %% 64u == 0u) {
        var s = 0.0;
        for (var i = 0u; i < 64u; i++) { s += red[lid.x + i]; }
        out[min(row0, p.rows - 1u)] = s;
    }
    workgroupBarrier();
    %s
}`, w, rpt, w/64*rpt, loop, end)
}

// usPerDispatch times the chain ds by difference: each iteration submits
// ds and reads 16 bytes of sb back, and an empty submit + readback is timed
// alongside and subtracted. A round trip costs a millisecond or two here;
// divided over a chain it read as tens of microseconds per small kernel in
// earlier notes. warm runs of ds go first (clocks, caches, compiles).
func usPerDispatch(b *testing.B, d *gpu.Device, sb *gpu.Buffer, ds []gpu.Dispatch, warm int) float64 {
	b.Helper()
	run := func(ds []gpu.Dispatch) {
		if err := d.Run(nil, ds, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := d.ReadBuffer(sb, 16); err != nil {
			b.Fatal(err)
		}
	}
	for range warm {
		run(ds)
	}
	var t0, tn time.Duration
	for i := 0; i < b.N; i++ {
		s0 := time.Now()
		run(nil)
		t0 += time.Since(s0)
		s0 = time.Now()
		run(ds)
		tn += time.Since(s0)
	}
	return float64((tn - t0).Nanoseconds()) / 1e3 / float64(b.N*len(ds))
}

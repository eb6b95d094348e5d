package gpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
)

// BenchmarkDispatchShapes separates the parts of a dispatch's fixed cost:
// an empty kernel with one or many workgroups, the pipeline and bind group
// set once or per dispatch, one compute pass for all or one per dispatch,
// and a read-write buffer shared by all (a barrier between each pair).
func BenchmarkDispatchShapes(b *testing.B) {
	d := testDevice(b)
	empty, err := d.Pipeline("bench/empty", `
@group(0) @binding(0) var<uniform> u: vec4<u32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    _ = u.x;
}`, []BindKind{Uniform})
	if err != nil {
		b.Fatal(err)
	}
	ub, _ := d.NewUniform("u", make([]byte, 16))
	ug, err := d.BindGroup(empty, "bench/empty", Whole(ub))
	if err != nil {
		b.Fatal(err)
	}
	rw, err := d.Pipeline("bench/rw", `
@group(0) @binding(0) var<storage, read_write> s: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x == 0u) {
        s[0] = s[0] + 1u;
    }
}`, []BindKind{ReadWrite})
	if err != nil {
		b.Fatal(err)
	}
	sb, _ := d.NewStorage("s", 64)
	sg, err := d.BindGroup(rw, "bench/rw", Whole(sb))
	if err != nil {
		b.Fatal(err)
	}
	const n = 400
	type shape struct {
		name       string
		p          *Pipeline
		g          *wgpu.BindGroup
		wg         uint32
		once, pass bool
		alt        []*Pipeline       // cycle through these pipelines
		altG       []*wgpu.BindGroup // and these bind groups
	}
	var alt []*Pipeline
	var altG []*wgpu.BindGroup
	for i := 0; i < 8; i++ {
		pi, err := d.Pipeline(fmt.Sprint("bench/rw", i), fmt.Sprintf(`
@group(0) @binding(0) var<storage, read_write> s: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x == 0u) {
        s[0] = s[0] + %du;
    }
}`, i+1), []BindKind{ReadWrite})
		if err != nil {
			b.Fatal(err)
		}
		alt = append(alt, pi)
		big, err := d.NewStorage("big", 120<<20)
		if err != nil {
			b.Fatal(err)
		}
		gi, err := d.BindGroup(rw, fmt.Sprint("bench/big", i), Whole(big))
		if err != nil {
			b.Fatal(err)
		}
		altG = append(altG, gi)
	}
	for _, s := range []shape{
		{"empty/wg1", empty, ug, 1, false, false, nil, nil},
		{"empty/wg1/set-once", empty, ug, 1, true, false, nil, nil},
		{"empty/wg1/pass-each", empty, ug, 1, false, true, nil, nil},
		{"empty/wg1024", empty, ug, 1024, false, false, nil, nil},
		{"empty/wg16384", empty, ug, 16384, false, false, nil, nil},
		{"rw-dep/wg1", rw, sg, 1, false, false, nil, nil},
		{"rw-dep/wg1024", rw, sg, 1024, false, false, nil, nil},
		{"rw-dep/wg1/pass-each", rw, sg, 1, false, true, nil, nil},
		{"rw-dep/wg64/alt8-pipelines", rw, sg, 64, false, false, alt, nil},
		{"rw-dep/wg64/alt8-bg-120MiB", rw, sg, 64, false, false, nil, altG},
	} {
		b.Run(s.name, func(b *testing.B) {
			run := func(k int) {
				enc, err := d.dev.CreateCommandEncoder(&wgpu.CommandEncoderDescriptor{})
				if err != nil {
					b.Fatal(err)
				}
				var pass *wgpu.ComputePassEncoder
				for i := 0; i < k; i++ {
					if pass == nil {
						pass = enc.BeginComputePass(nil)
					}
					if !s.once || i == 0 {
						p, g := s.p, s.g
						if s.alt != nil {
							p = s.alt[i%len(s.alt)]
						}
						if s.altG != nil {
							g = s.altG[i%len(s.altG)]
						}
						pass.SetPipeline(p.pipe)
						pass.SetBindGroup(0, g, nil)
					}
					pass.DispatchWorkgroups(s.wg, 1, 1)
					if s.pass {
						pass.End()
						pass.Release()
						pass = nil
					}
				}
				if pass != nil {
					pass.End()
					pass.Release()
				}
				cb, err := enc.Finish(nil)
				if err != nil {
					b.Fatal(err)
				}
				d.queue.Submit(cb)
				cb.Release()
				enc.Release()
				if _, err := d.ReadBuffer(sb, 16); err != nil {
					b.Fatal(err)
				}
			}
			run(n)
			// The difference between n and 0 dispatches per submit is the
			// dispatches' own cost, free of the submit and readback.
			var t0, tn float64
			for i := 0; i < b.N; i++ {
				s0 := time.Now()
				run(0)
				t0 += float64(time.Since(s0).Microseconds())
				s0 = time.Now()
				run(n)
				tn += float64(time.Since(s0).Microseconds())
			}
			b.ReportMetric((tn-t0)/float64(b.N*n), "us/dispatch")
			b.ReportMetric(t0/float64(b.N), "us/empty-submit")
		})
	}
}

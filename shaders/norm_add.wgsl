// The DiT's gated residual and the next norm in one pass over rows
// [row0, row0+rows) of x, u [*, width] (rows_norm.wgsl's RMS norm, its
// reductions and arithmetic, so each value is what rows_norm then
// gated_add would give):
//   u += g ⊙ (x/sqrt(mean(x²)+eps) · w)   g = gate[gate_off + c] when has_gate, else 1
// then, when has_next, y = u/sqrt(mean(u²)+eps2) · w2 (when has_w2) ·
// gate[scale_off + c] (when has_scale). One workgroup per row: dispatch
// (rows, 1, 1) up to 65535, then rows continue in y.
//!P NormAddParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read> gate: array<f32>;
@group(0) @binding(4) var<storage, read> nw2: array<f32>;
@group(0) @binding(5) var<storage, read_write> u: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

var<workgroup> red: array<f32, 256>;

fn reduce(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wg.y * nwg.x + wg.x;
    if (r >= p.rows) {
        return;
    }
    let base = (p.row0 + r) * p.width;
    let mean = 0.0;
    var ss = 0.0;
    for (var i = lid.x; i < p.width; i += 256u) {
        let d = x[base + i] - mean;
        ss += d * d;
    }
    let inv = inverseSqrt(reduce(ss, lid.x) / f32(p.width) + p.eps);
    // Each invocation updates, then reads back, only its own columns.
    var ss2 = 0.0;
    for (var i = lid.x; i < p.width; i += 256u) {
        var v = (x[base + i] - mean) * inv;
        if (p.has_w == 1u) {
            v *= nw[i];
        }
        var g = 1.0;
        if (p.has_gate == 1u) {
            g = gate[p.gate_off + i];
        }
        let un = u[base + i] + g * v;
        u[base + i] = un;
        ss2 += un * un;
    }
    if (p.has_next == 0u) {
        return;
    }
    let inv2 = inverseSqrt(reduce(ss2, lid.x) / f32(p.width) + p.eps2);
    for (var i = lid.x; i < p.width; i += 256u) {
        var v = u[base + i] * inv2;
        if (p.has_w2 == 1u) {
            v *= nw2[i];
        }
        if (p.has_scale == 1u) {
            v *= gate[p.scale_off + i];
        }
        y[base + i] = v;
    }
}

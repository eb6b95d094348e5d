// Per-head RMS norm (when has_norm, weight nw [hd], eps) then RoPE of rows
// [row0, row0+rows) of x [*, width] in place: each head vector's pairs
// (2i, 2i+1) turn as complex numbers by rope[row, 2i] (cos) and
// rope[row, 2i+1] (sin), rope [*, hd]. One invocation per (row, head) over
// the (x, y) grid of 64-wide workgroups.
//!P QKRopeParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> nw: array<f32>;
@group(0) @binding(2) var<storage, read> rope: array<f32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = (wg.y * nwg.x + wg.x) * 64u + lid.x;
    if (idx >= p.rows * p.heads) {
        return;
    }
    let row = p.row0 + idx / p.heads;
    let base = row * p.width + (idx % p.heads) * p.hd;
    var inv = 1.0;
    if (p.has_norm == 1u) {
        var ss = 0.0;
        for (var i = 0u; i < p.hd; i++) {
            let v = x[base + i];
            ss += v * v;
        }
        inv = inverseSqrt(ss / f32(p.hd) + p.eps);
    }
    let rb = row * p.hd;
    for (var i = 0u; i < p.hd; i += 2u) {
        var a = x[base + i] * inv;
        var b = x[base + i + 1u] * inv;
        if (p.has_norm == 1u) {
            a *= nw[i];
            b *= nw[i + 1u];
        }
        let c = rope[rb + i];
        let s = rope[rb + i + 1u];
        x[base + i] = a * c - b * s;
        x[base + i + 1u] = a * s + b * c;
    }
}

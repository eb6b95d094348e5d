// Applies group norm to an HWC image x [pixels, c] with the statistics
// group_norm_stats wrote: y = (x - mean)·inv·w[c] + b[c], then
// y·sigmoid(y) when p.silu == 1. One invocation per value over the
// (x, y) grid of 256-wide workgroups.
//!P GroupNormApplyParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> stats: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read> nb: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = (wg.y * nwg.x + wg.x) * 256u + lid.x;
    if (idx >= p.pixels * p.c) {
        return;
    }
    let c = idx % p.c;
    let g = c / (p.c / p.groups);
    var v = (x[idx] - stats[2u * g]) * stats[2u * g + 1u] * nw[c] + nb[c];
    if (p.silu == 1u) {
        v = v / (1.0 + exp(-v));
    }
    y[idx] = v;
}

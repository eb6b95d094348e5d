// u += g ⊙ y on rows [row0, row0+rows) of u, y [*, width], with the gate
// g = gate[gate_off + c] (or 1 when has_gate is 0). One invocation per
// value over the (x, y) grid of 256-wide workgroups.
//!P GatedAddParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> gate: array<f32>;
@group(0) @binding(3) var<storage, read_write> u: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = (wg.y * nwg.x + wg.x) * 256u + lid.x;
    if (idx >= p.rows * p.width) {
        return;
    }
    let i = p.row0 * p.width + idx;
    var g = 1.0;
    if (p.has_gate == 1u) {
        g = gate[p.gate_off + idx % p.width];
    }
    u[i] += g * y[i];
}

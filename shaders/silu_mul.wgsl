// g = silu(g) ⊙ u for n values from off: silu(x) = x / (1 + exp(-x)). One
// invocation per value over the (x, y) grid of 256-wide workgroups.
//!P SiLUMulParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> u: array<f32>;
@group(0) @binding(2) var<storage, read_write> g: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = (wg.y * nwg.x + wg.x) * 256u + lid.x;
    if (idx >= p.n) {
        return;
    }
    let i = p.off + idx;
    let v = g[i];
    g[i] = v / (1.0 + exp(-v)) * u[i];
}

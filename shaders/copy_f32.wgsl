// Copies n floats: y[doff + i] = x[soff + i] (the VAE decoder gathers the
// rows a convolution reads from several bands into one binding). One
// invocation per value over the (x, y) grid of 256-wide workgroups.
//!P CopyF32Params (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wg.y * nwg.x + wg.x) * 256u + lid.x;
    if (i < p.n) {
        y[p.doff + i] = x[p.soff + i];
    }
}

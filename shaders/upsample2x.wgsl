// Nearest-neighbour 2x upsampling of an HWC image x [h, w, c] into
// y [2h, 2w, c]. One invocation per output value over the (x, y) grid of
// 256-wide workgroups.
//!P Upsample2xParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = (wg.y * nwg.x + wg.x) * 256u + lid.x;
    let w2 = 2u * p.w;
    if (idx >= 4u * p.h * p.w * p.c) {
        return;
    }
    let c = idx % p.c;
    let pix = idx / p.c;
    let sy = (pix / w2) / 2u;
    let sx = (pix % w2) / 2u;
    y[idx] = x[(sy * p.w + sx) * p.c + c];
}

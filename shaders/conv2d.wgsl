// 2-D convolution of an HWC image, stride 1, zero padding k/2 (k = 1 or 3):
// y[p, o] = b[o] + Σ w[o, ky, kx, c] · x[p + (ky - k/2, kx - k/2), c]
// (+ res[p, o] when p.res == 1). Weights are [out, ky, kx, in] so the
// inner loop walks contiguous channels of one neighbour pixel.
// With p.up == 1 the input is the h/2 × w/2 image upsampled 2× (nearest)
// on the fly: x[sy, sx] reads the stored pixel (sy/2, sx/2).
// A dispatch computes output rows [y0, y0 + rows) of the h × w image; the
// bindings hold bands of rows: y and res start at image row ybase, x at
// (input) row xbase, so an image larger than one binding is convolved
// band by band with the same sums in the same order.
// One invocation per output value; the flat index spans the grid
// (x, y) of 256-wide workgroups.
//!P Conv2DParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> wt: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let idx = (wg.y * nw.x + wg.x) * 256u + lid.x;
    let total = p.rows * p.w * p.cout;
    if (idx >= total) {
        return;
    }
    let o = idx % p.cout;
    let pix = idx / p.cout;
    let py = i32(p.y0 + pix / p.w);
    let px = i32(pix % p.w);
    let r = i32(p.k / 2u);
    let sh = p.up;
    let win = p.w >> sh;
    var acc = bias[o];
    for (var ky = 0u; ky < p.k; ky++) {
        let sy = py + i32(ky) - r;
        if (sy < 0 || sy >= i32(p.h)) {
            continue;
        }
        for (var kx = 0u; kx < p.k; kx++) {
            let sx = px + i32(kx) - r;
            if (sx < 0 || sx >= i32(p.w)) {
                continue;
            }
            let xb = (((u32(sy) >> sh) - p.xbase) * win + (u32(sx) >> sh)) * p.cin;
            let wb = ((o * p.k + ky) * p.k + kx) * p.cin;
            for (var c = 0u; c < p.cin; c++) {
                acc += wt[wb + c] * x[xb + c];
            }
        }
    }
    let yi = idx + (p.y0 - p.ybase) * p.w * p.cout;
    if (p.res == 1u) {
        acc += res[yi];
    }
    y[yi] = acc;
}

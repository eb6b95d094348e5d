// conv2d.wgsl's convolution (the same bindings, uniform, bands, on-the-fly
// upsampling and sums: bias, then the taps (ky, kx) in order, each over
// the input channels in order) as a tiled implicit GEMM: a workgroup of
// 256 computes 64 output pixels (of the flat rows [y0, y0+rows) × w) × 64
// output channels, walking the taps × input channels in steps of 16: the
// step's 64 input pixels' and 64 weight rows' 16 channels are staged in
// workgroup memory (8 KiB), each thread accumulating a 4×4 micro-tile
// (pixels tp + 16i, channels tc + 16j). Input pixels outside the image
// read zeros. cin is a multiple of 16.
// Dispatch (min(g, 65535), ceil(g/65535), ceil(cout/64)) with
// g = ceil(rows·w/64) pixel tiles.
//!P Conv2DParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> wt: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

var<workgroup> xs: array<f32, 1024>; // [16 channels][64 pixels]
var<workgroup> ws: array<f32, 1024>; // [16 channels][64 output channels]

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let npix = p.rows * p.w;
    let pix0 = (wg.y * nw.x + wg.x) * 64u;
    let o0 = wg.z * 64u;
    if (pix0 >= npix || o0 >= p.cout) {
        return;
    }
    let l = lid.x;
    let tp = l % 16u;
    let tc = l / 16u;
    // Staging: thread l loads channels kq..kq+3 of pixel (and weight row) sl.
    let sl = l / 4u;
    let kq = (l % 4u) * 4u;
    let spix = min(pix0 + sl, npix - 1u); // pixels past the end redo the last, unwritten
    let sy = i32(p.y0 + spix / p.w);
    let sx = i32(spix % p.w);
    let so = min(o0 + sl, p.cout - 1u);
    let r = i32(p.k / 2u);
    let sh = p.up;
    let win = p.w >> sh;
    let cin4 = p.cin / 4u;

    var acc: array<array<f32, 4>, 4>;
    for (var j = 0u; j < 4u; j++) {
        let b = bias[min(o0 + tc + 16u * j, p.cout - 1u)];
        for (var i = 0u; i < 4u; i++) {
            acc[i][j] = b;
        }
    }
    for (var ky = 0u; ky < p.k; ky++) {
        for (var kx = 0u; kx < p.k; kx++) {
            let iy = sy + i32(ky) - r;
            let ix = sx + i32(kx) - r;
            let inside = iy >= 0 && iy < i32(p.h) && ix >= 0 && ix < i32(p.w);
            var xb = 0u;
            if (inside) {
                xb = (((u32(iy) >> sh) - p.xbase) * win + (u32(ix) >> sh)) * cin4;
            }
            let wb = ((so * p.k + ky) * p.k + kx) * cin4;
            for (var c0 = 0u; c0 < p.cin; c0 += 16u) {
                var xv = vec4<f32>(0.0);
                if (inside) {
                    xv = x[xb + (c0 + kq) / 4u];
                }
                let wv = wt[wb + (c0 + kq) / 4u];
                for (var q = 0u; q < 4u; q++) {
                    xs[(kq + q) * 64u + sl] = xv[q];
                    ws[(kq + q) * 64u + sl] = wv[q];
                }
                workgroupBarrier();
                for (var k = 0u; k < 16u; k++) {
                    var a: array<f32, 4>;
                    var b: array<f32, 4>;
                    for (var i = 0u; i < 4u; i++) {
                        a[i] = xs[k * 64u + tp + 16u * i];
                        b[i] = ws[k * 64u + tc + 16u * i];
                    }
                    for (var i = 0u; i < 4u; i++) {
                        for (var j = 0u; j < 4u; j++) {
                            acc[i][j] += b[j] * a[i];
                        }
                    }
                }
                workgroupBarrier();
            }
        }
    }
    for (var i = 0u; i < 4u; i++) {
        let pix = pix0 + tp + 16u * i;
        if (pix >= npix) {
            continue;
        }
        for (var j = 0u; j < 4u; j++) {
            let o = o0 + tc + 16u * j;
            if (o >= p.cout) {
                continue;
            }
            let yi = (pix + (p.y0 - p.ybase) * p.w) * p.cout + o;
            var v = acc[i][j];
            if (p.res == 1u) {
                v += res[yi];
            }
            y[yi] = v;
        }
    }
}

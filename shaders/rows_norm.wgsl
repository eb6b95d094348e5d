// Normalizes rows [row0, row0+rows) of x [*, width] into the same rows of
// y: mode 0 RMS norm x/sqrt(mean(x²)+eps), mode 1 LayerNorm without affine
// (x-mean)/sqrt(var+eps); then ·w (when has_w) and ·scale[scale_off+c]
// (when has_scale). One workgroup per row: dispatch (rows, 1, 1) up to
// 65535, then rows continue in y.
//!P RowsNormParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

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
    var mean = 0.0;
    if (p.mode == 1u) {
        var s = 0.0;
        for (var i = lid.x; i < p.width; i += 256u) {
            s += x[base + i];
        }
        mean = reduce(s, lid.x) / f32(p.width);
    }
    var ss = 0.0;
    for (var i = lid.x; i < p.width; i += 256u) {
        let d = x[base + i] - mean;
        ss += d * d;
    }
    let inv = inverseSqrt(reduce(ss, lid.x) / f32(p.width) + p.eps);
    for (var i = lid.x; i < p.width; i += 256u) {
        var v = (x[base + i] - mean) * inv;
        if (p.has_w == 1u) {
            v *= nw[i];
        }
        if (p.has_scale == 1u) {
            v *= scale[p.scale_off + i];
        }
        y[base + i] = v;
    }
}

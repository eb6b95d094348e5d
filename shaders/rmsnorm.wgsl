// RMSNorm of `sub` consecutive segments of n values per token row:
// y = x / sqrt(mean(x²) + eps) * (w or 1+w). Per-head q/k norm is sub =
// heads, n = head_dim; a plain norm is sub = 1. One workgroup per segment,
// dispatch (sub, ntok or head rows, 1).
// sel as in matmul (input rows); output rows are relative to the selection.
// mode 0: out = y; mode 1: out += alpha * y (post-norm residual add).
// The IO placeholder below declares x/out: separate buffers, or one read_write buffer for the
// in-place variant. 256 threads: a hidden row of a few thousand values is
// then a handful of independent loads per thread, not a long dependent
// chain (one workgroup is all a decode step gives this kernel).
//!P NormParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
__IO__

var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let seg = wg.x;
    let t = wg.y;
    var base = 0u;
    var cnt = step[1];
    if (p.sel == 1u) {
        base = step[2];
        cnt = step[3];
    } else if (p.sel == 2u) {
        cnt = step[3];
    }
    let live = t < cnt;
    let ib = p.in_off + (base + t) * p.in_stride + seg * p.n;
    let ob = p.out_off + t * p.out_stride + seg * p.n;
    var ss = 0.0;
    if (live) {
        for (var i = lid.x; i < p.n; i += 256u) {
            let v = x[ib + i];
            ss += v * v;
        }
    }
    red[lid.x] = ss;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            red[lid.x] += red[lid.x + s];
        }
        workgroupBarrier();
    }
    let r = 1.0 / sqrt(red[0] / f32(p.n) + p.eps);
    if (!live) {
        return;
    }
    for (var i = lid.x; i < p.n; i += 256u) {
        var g = nw[i];
        if (p.plus_one == 1u) {
            g += 1.0;
        }
        let y = x[ib + i] * r * g;
        if (p.mode == 1u) {
            out[ob + i] += p.alpha * y;
        } else {
            out[ob + i] = y;
        }
    }
}

// Group-norm statistics of an HWC image x [pixels, c]: for group g (of
// c/groups channels over all pixels) stats[2g] = mean and stats[2g+1] =
// 1/sqrt(var + eps), the variance taken around the mean (two passes: pass
// 0 the sums and the mean, pass 1 the squared deviations and 1/σ).
// The image may come in bands of rows, one dispatch per band and pass: x
// holds pixels [pix0, pix0 + pixels) of total. Invocation lid sums the
// group's elements i ≡ lid (mod 256) in order, carrying its partial sum
// from band to band in part[256g + lid], so the sums (and the result) are
// the same whatever the bands. One workgroup per group: dispatch
// (groups, 1, 1).
//!P GroupNormStatsParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;

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
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = wg.x;
    let cg = p.c / p.groups;
    let n = p.pixels * cg;
    let e0 = p.pix0 * cg;
    var s = 0.0;
    if (e0 > 0u) {
        s = part[256u * g + lid.x];
    }
    var mean = 0.0;
    if (p.phase == 1u) {
        mean = stats[2u * g];
    }
    // The first local element of this invocation: (e0 + i) % 256 == lid.
    for (var i = (lid.x + 256u - e0 % 256u) % 256u; i < n; i += 256u) {
        let v = x[(i / cg) * p.c + g * cg + i % cg];
        if (p.phase == 1u) {
            let d = v - mean;
            s += d * d;
        } else {
            s += v;
        }
    }
    if (e0 + n < p.total * cg) {
        part[256u * g + lid.x] = s;
        return;
    }
    let m = reduce(s, lid.x) / f32(p.total * cg);
    if (lid.x == 0u) {
        if (p.phase == 1u) {
            stats[2u * g + 1u] = inverseSqrt(m + p.eps);
        } else {
            stats[2u * g] = m;
        }
    }
}

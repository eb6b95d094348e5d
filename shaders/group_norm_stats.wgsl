// Group-norm statistics of an HWC image x [pixels, c]: for group g (of
// c/groups channels over all pixels) stats[2g] = mean and stats[2g+1] =
// 1/sqrt(var + eps), the variance taken around the mean (two passes).
// One workgroup per group: dispatch (groups, 1, 1).
//!P GroupNormStatsParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;

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
    var s = 0.0;
    for (var i = lid.x; i < n; i += 256u) {
        s += x[(i / cg) * p.c + g * cg + i % cg];
    }
    let mean = reduce(s, lid.x) / f32(n);
    var ss = 0.0;
    for (var i = lid.x; i < n; i += 256u) {
        let d = x[(i / cg) * p.c + g * cg + i % cg] - mean;
        ss += d * d;
    }
    let v = reduce(ss, lid.x) / f32(n);
    if (lid.x == 0u) {
        stats[2u * g] = mean;
        stats[2u * g + 1u] = inverseSqrt(v + p.eps);
    }
}

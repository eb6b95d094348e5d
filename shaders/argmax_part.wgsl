// First stage of the greedy pick: workgroup g finds the largest value of
// elements [g·per, (g+1)·per) of the last head row of the logits (the
// lowest index on ties) and writes (value bits, index) to part[g], index
// 0xFFFFFFFF when its span holds no pick and 0xFFFFFFFE (POISON) when it
// holds a NaN or infinity. One workgroup
// reading a whole 100k+ vocabulary waited on ~100 loads in turn per
// thread (90 µs on an H200); spread over many workgroups each thread makes
// a few independent loads. Dispatch (ceil(n/per), rows, 1); argmax.wgsl
// reduces the parts. With rows > 1 workgroup row y reads head row
// step[3]-rows+y (the last rows of the step's logits: every row of a
// verification step) and writes part[y*ceil(n/per) + g].
//!P ArgmaxPartParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> logits: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<vec2<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = (step[3] - nwg.y + wg.y) * p.n;
    let lo = wg.x * p.per;
    let hi = min(lo + p.per, p.n);
    // Four independent running picks per thread (indices i, i+256, i+512,
    // i+768 of each 1024), merged lowest index first on ties.
    var bestv = array<f32, 4>(-3.4e38, -3.4e38, -3.4e38, -3.4e38);
    var besti = array<u32, 4>(NONE, NONE, NONE, NONE);
    for (var i0 = lo + lid.x; i0 < hi; i0 += 1024u) {
        for (var c = 0u; c < 4u; c++) {
            let i = i0 + 256u * c;
            if (i < hi) {
                let v = logits[row + i];
                var ci = i;
                if (!finite(v)) {
                    ci = POISON;
                }
                if (better(v, ci, bestv[c], besti[c])) {
                    bestv[c] = v;
                    besti[c] = ci;
                }
            }
        }
    }
    var best = bestv[0];
    var idx = besti[0];
    for (var c = 1u; c < 4u; c++) {
        if (better(bestv[c], besti[c], best, idx)) {
            best = bestv[c];
            idx = besti[c];
        }
    }
    let r = pick(lid.x, best, idx);
    if (lid.x == 0u) {
        part[wg.y * nwg.x + wg.x] = vec2<u32>(bitcast<u32>(bv[0]), r);
    }
}

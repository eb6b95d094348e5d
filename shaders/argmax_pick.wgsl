// The reduction both greedy-pick kernels end with (argmax_part.wgsl over a
// span of logits, argmax.wgsl over the spans' picks): the best (value,
// index) of the workgroup's 256 threads, the larger value, the lower index
// on ties, an index of NONE (no pick: NaN, or nothing in range) losing to
// any other.
const NONE: u32 = 0xFFFFFFFFu;

var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;

// pick returns the workgroup's best index (every thread calls it, in
// uniform control flow; bv[0] then holds its value).
fn pick(l: u32, best: f32, idx: u32) -> u32 {
    bv[l] = best;
    bi[l] = idx;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (l < s) {
            let ov = bv[l + s];
            let oi = bi[l + s];
            if (oi != NONE && (bi[l] == NONE || ov > bv[l] || (ov == bv[l] && oi < bi[l]))) {
                bv[l] = ov;
                bi[l] = oi;
            }
        }
        workgroupBarrier();
    }
    return bi[0];
}

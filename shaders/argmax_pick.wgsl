// The reduction both greedy-pick kernels end with (argmax_part.wgsl over a
// span of logits, argmax.wgsl over the spans' picks): the best (value,
// index) of the workgroup's 256 threads, the larger value, the lower index
// on ties, an index of NONE (nothing in range) losing to any other and one
// of POISON (a NaN or infinity was seen) beating any other, so that a
// non-finite logit anywhere in the row makes the pick POISON: the host
// refuses it rather than decode token 0 forever.
const NONE: u32 = 0xFFFFFFFFu;
const POISON: u32 = 0xFFFFFFFEu;

// finite reports whether v is neither NaN nor infinite (by its exponent
// bits: compilers may assume NaN away in comparisons).
fn finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

// better reports whether the candidate (v, i) beats the pick (bv, bi).
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    if (i == NONE || bi == POISON) {
        return false;
    }
    if (i == POISON || bi == NONE) {
        return true;
    }
    return v > bv || (v == bv && i < bi);
}

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
            if (better(ov, oi, bv[l], bi[l])) {
                bv[l] = ov;
                bi[l] = oi;
            }
        }
        workgroupBarrier();
    }
    return bi[0];
}

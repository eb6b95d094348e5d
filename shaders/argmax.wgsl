// Greedy pick over the last head row of the logits: the index of the
// largest value, the lowest index on ties, NaN never chosen. The pick is
// written to tokens[0] (the next step's embedding input) and ids[step[4]].
// Dispatch (1, 1, 1).
struct P {
    n: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> logits: array<f32>;
@group(0) @binding(3) var<storage, read_write> tokens: array<u32>;
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;

var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    let row = (step[3] - 1u) * p.n;
    // Four independent running picks per thread (indices i, i+256, i+512,
    // i+768 of each 1024): a single chain waits on every load in turn,
    // and over a vocabulary of 100k+ that serial latency was the cost.
    var bestv = array<f32, 4>(-3.4e38, -3.4e38, -3.4e38, -3.4e38);
    var besti = array<u32, 4>(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu);
    for (var i0 = lid.x; i0 < p.n; i0 += 1024u) {
        for (var c = 0u; c < 4u; c++) {
            let i = i0 + 256u * c;
            if (i < p.n) {
                let v = logits[row + i];
                if (v > bestv[c] || (besti[c] == 0xFFFFFFFFu && v == bestv[c])) {
                    bestv[c] = v;
                    besti[c] = i;
                }
            }
        }
    }
    var best = bestv[0];
    var idx = besti[0];
    for (var c = 1u; c < 4u; c++) {
        if (besti[c] != 0xFFFFFFFFu && (idx == 0xFFFFFFFFu || bestv[c] > best || (bestv[c] == best && besti[c] < idx))) {
            best = bestv[c];
            idx = besti[c];
        }
    }
    bv[lid.x] = best;
    bi[lid.x] = idx;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            let ov = bv[lid.x + s];
            let oi = bi[lid.x + s];
            if (ov > bv[lid.x] || (ov == bv[lid.x] && oi < bi[lid.x])) {
                bv[lid.x] = ov;
                bi[lid.x] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        var r = bi[0];
        if (r == 0xFFFFFFFFu) {
            r = 0u;
        }
        tokens[0] = r;
        ids[step[4]] = r;
    }
}

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
    var best = -3.4e38;
    var idx = 0xFFFFFFFFu;
    for (var i = lid.x; i < p.n; i += 256u) {
        let v = logits[row + i];
        if (v > best || (idx == 0xFFFFFFFFu && v == best)) {
            best = v;
            idx = i;
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

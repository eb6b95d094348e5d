// Greedy pick over the last head row of the logits, second stage: the
// best of the n parts argmax_part.wgsl wrote (value bits, index; index
// 0xFFFFFFFF for none, 0xFFFFFFFE for a span holding a NaN or infinity),
// the lowest index on ties, so the pick is the row's argmax with the
// lowest index among equals, or POISON (0xFFFFFFFE) when any logit is not
// finite. The pick is written to tokens[0] (the next step's embedding
// input; 0 for POISON) and ids[step[4]]. Dispatch (1, rows, 1): with
// rows > 1 workgroup row y reduces parts [y*n, (y+1)*n) (argmax_part.wgsl
// over as many rows) into ids[step[4]+y], and only the last row's pick
// feeds tokens[0].
//!P ArgmaxParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> part: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> tokens: array<u32>;
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    var best = -3.4e38;
    var idx = NONE;
    for (var i = lid.x; i < p.n; i += 256u) {
        let pv = part[wg.y * p.n + i];
        let v = bitcast<f32>(pv.x);
        if (better(v, pv.y, best, idx)) {
            best = v;
            idx = pv.y;
        }
    }
    var r = pick(lid.x, best, idx);
    if (lid.x == 0u) {
        if (r == NONE) {
            r = 0u;
        }
        // POISON (a non-finite logit) goes to the host, which refuses it;
        // the next step's embedding input stays in range meanwhile.
        var tok = r;
        if (r == POISON) {
            tok = 0u;
        }
        if (wg.y == nwg.y - 1u) {
            tokens[0] = tok;
        }
        ids[step[4] + wg.y] = r;
    }
}

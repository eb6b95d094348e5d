// Softmax attention without a mask over n rows: attention_full.wgsl's
// contract and uniform (out[i] = Σ_j softmax_j(q[i]·k[j]·scale) v[j] per
// head z, row i of head z at (row0 + i)·stride + z·d), organized for many
// rows like attn_prefill.wgsl: a workgroup takes one head and __BQ__
// consecutive query rows, a thread (see __SPLIT__) per row holding its
// query and output (head dim __HD__) in registers, and walks the keys in tiles of __BK__
// staged in workgroup memory, so every key and value read serves __BQ__
// queries (attention_full reads them once per query, with a workgroup
// reduction per key). The softmax is online: a running max and sum,
// rescaled once per tile. With __SPLIT__ threads per row, each computes
// the row's scores (all of them: the same values) but keeps and writes
// only its 1/__SPLIT__ of the output channels, so a wide head's query and
// output fit in registers; the results do not depend on __SPLIT__.
// stride and d are multiples of 4. Dispatch (ceil(n/__BQ__), 1, heads).
//!P AttentionFullParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

const HD4: u32 = __HD4__u;
const BK: u32 = __BK__u;
const BQ: u32 = __BQ__u;
const SPLIT: u32 = __SPLIT__u;
const OD4: u32 = __OD4__u; // output vec4s per thread: HD4 / SPLIT
var<workgroup> ks: array<vec4<f32>, __TILE__>; // BK keys x HD4
var<workgroup> vs: array<vec4<f32>, __TILE__>;

@compute @workgroup_size(__NT__)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i0 = wg.x * BQ;
    if (i0 >= p.n) {
        return;
    }
    let ql = lid.x / SPLIT;
    let part = (lid.x % SPLIT) * OD4; // this thread's first output vec4
    let i = min(i0 + ql, p.n - 1u); // rows past the end redo the last and are not written
    let s4 = p.stride / 4u;
    let h4 = wg.z * HD4;
    let qb = (p.row0 + i) * s4 + h4;
    var qr: array<vec4<f32>, __HD4__>;
    var o: array<vec4<f32>, __OD4__>;
    for (var d = 0u; d < HD4; d++) {
        qr[d] = q[qb + d];
    }
    for (var d = 0u; d < OD4; d++) {
        o[d] = vec4<f32>(0.0);
    }
    var m = -3.0e38;
    var l = 0.0;
    for (var j0 = 0u; j0 < p.n; j0 += BK) {
        let nk = min(BK, p.n - j0);
        for (var e = lid.x; e < BK * HD4; e += BQ * SPLIT) {
            let jj = e / HD4;
            if (jj < nk) {
                let b = (p.row0 + j0 + jj) * s4 + h4 + e % HD4;
                ks[e] = k[b];
                vs[e] = v[b];
            }
        }
        workgroupBarrier();
        var s: array<f32, __BK__>;
        var mt = m;
        for (var jj = 0u; jj < nk; jj++) {
            var dd = vec4<f32>(0.0);
            for (var d = 0u; d < HD4; d++) {
                dd = fma(qr[d], ks[jj * HD4 + d], dd);
            }
            let sc = ((dd.x + dd.y) + (dd.z + dd.w)) * p.scale;
            s[jj] = sc;
            mt = max(mt, sc);
        }
        let corr = exp(m - mt);
        l *= corr;
        for (var d = 0u; d < OD4; d++) {
            o[d] *= corr;
        }
        for (var jj = 0u; jj < nk; jj++) {
            let pj = exp(s[jj] - mt);
            l += pj;
            for (var d = 0u; d < OD4; d++) {
                o[d] = fma(vec4<f32>(pj), vs[jj * HD4 + part + d], o[d]);
            }
        }
        m = mt;
        workgroupBarrier();
    }
    if (i0 + ql < p.n) {
        for (var d = 0u; d < OD4; d++) {
            out[qb + part + d] = o[d] / l;
        }
    }
}

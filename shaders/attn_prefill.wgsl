// Causal softmax attention for a long step (prefill): the same results as
// attention.wgsl (grouped-query heads, sliding window, score scale, tanh
// softcap), organized for many queries. A workgroup takes one head and __BQ__
// consecutive tokens of the step, one thread per token, and walks the keys
// in tiles of __BK__ staged in workgroup memory: every key and value read
// from the cache serves __BQ__ queries (attention.wgsl reads them once per
// query, which at 512 tokens moved a gigabyte per layer). Each thread
// keeps its query and output row (head_dim __HD__) in registers and a
// running max and sum (online softmax), rescaling once per tile.
// Dispatch (heads, ceil(ntok/__BQ__), 1).
const HD4: u32 = __HD4__u;
const BK: u32 = __BK__u;
const BQ: u32 = __BQ__u;
var<workgroup> ks: array<vec4<f32>, __TILE__>; // BK keys x HD4
var<workgroup> vs: array<vec4<f32>, __TILE__>;

@compute @workgroup_size(__BQ__)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let ntok = step[1];
    let t0 = wg.y * BQ;
    let t = min(t0 + lid.x, ntok - 1u); // rows past the end redo the last and are not written
    let pos = step[0] + t;
    let kvh = h / (p.heads / p.kv_heads);
    let kvw4 = p.kv_heads * HD4;
    let koff4 = kvh * HD4;
    var lo = 0u;
    if (p.window > 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    // The workgroup's keys: from the first row's lo to the last row's pos.
    let tl = min(t0 + BQ - 1u, ntok - 1u);
    let last = step[0] + tl;
    var glo = 0u;
    if (p.window > 0u && step[0] + t0 + 1u > p.window) {
        glo = step[0] + t0 + 1u - p.window;
    }
    let qb4 = (t * p.q_stride + h * p.hd) / 4u;
    var q: array<vec4<f32>, __HD4__>;
    var o: array<vec4<f32>, __HD4__>;
    for (var d = 0u; d < HD4; d++) {
        q[d] = qkv[qb4 + d];
        o[d] = vec4<f32>(0.0);
    }
    var m = -1e30;
    var l = 0.0;
    for (var j0 = glo; j0 <= last; j0 += BK) {
        let n = min(BK, last + 1u - j0);
        // Stage the tile's keys and values.
        for (var i = lid.x; i < BK * HD4; i += BQ) {
            let jj = i / HD4;
            let d = i % HD4;
            if (jj < n) {
                let b = kv_row(j0 + jj) * kvw4 + koff4 + d;
                ks[i] = k4(b);
                vs[i] = v4(b);
            }
        }
        workgroupBarrier();
        var s: array<f32, __BK__>;
        var mt = m;
        for (var jj = 0u; jj < BK; jj++) {
            let j = j0 + jj;
            var sc = -3.0e38;
            if (jj < n && j >= lo && j <= pos) {
                var dd = vec4<f32>(0.0);
                for (var d = 0u; d < HD4; d++) {
                    dd += q[d] * ks[jj * HD4 + d];
                }
                sc = ((dd.x + dd.y) + (dd.z + dd.w)) * p.scale;
                if (p.softcap > 0.0) {
                    sc = p.softcap * safe_tanh(sc / p.softcap);
                }
                mt = max(mt, sc);
            }
            s[jj] = sc;
        }
        let corr = exp(m - mt);
        l *= corr;
        for (var d = 0u; d < HD4; d++) {
            o[d] *= corr;
        }
        for (var jj = 0u; jj < BK; jj++) {
            let j = j0 + jj;
            if (jj < n && j >= lo && j <= pos) {
                let pj = exp(s[jj] - mt);
                l += pj;
                for (var d = 0u; d < HD4; d++) {
                    o[d] += pj * vs[jj * HD4 + d];
                }
            }
        }
        m = mt;
        workgroupBarrier();
    }
    if (t0 + lid.x < ntok) {
        let ob = (t * p.heads + h) * p.hd;
        let sn = sink_norm(h, m, l);
        for (var d = 0u; d < HD4; d++) {
            let v = o[d] * sn.x / sn.y;
            out[ob + 4u * d] = v.x;
            out[ob + 4u * d + 1u] = v.y;
            out[ob + 4u * d + 2u] = v.z;
            out[ob + 4u * d + 3u] = v.w;
        }
    }
}

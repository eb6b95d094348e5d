// Causal softmax attention over the KV cache for each (head, token) of the
// step, with grouped-query heads, an optional sliding window, the score
// scale and an optional tanh softcap. Keys are visited in tiles of 64 with
// an online (running max) softmax, so any context length works with a fixed
// amount of workgroup memory. head_dim <= 256. Dispatch (heads, ntok, S).
//
// split_len 0: one workgroup covers a token's whole span and writes out.
// split_len > 0 (split-K, "flash decoding"): workgroup z covers positions
// lo + z*split_len .. +split_len-1 of the span and writes its partial
// (running max, sum, unnormalized output) to part, so a long context is
// spread over many workgroups; attn_combine merges the partials.
struct P {
    heads: u32,
    kv_heads: u32,
    hd: u32,
    window: u32,   // 0 = unlimited, else the last `window` positions
    scale: f32,
    softcap: f32,
    q_stride: u32,
    split_len: u32,
    max_splits: u32, // partial slots per (token, head)
    _p0: u32,
    _p1: u32,
    _p2: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;

var<workgroup> qs: array<f32, 256>;
var<workgroup> sc: array<f32, 64>;

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step[1]) {
        return;
    }
    let pos = step[0] + t;
    let kvh = h / (p.heads / p.kv_heads);
    let kvw = p.kv_heads * p.hd;
    let koff = kvh * p.hd;
    var lo = 0u;
    if (p.window > 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    var hi = pos;
    let pb = ((t * p.heads + h) * p.max_splits + wg.z) * (p.hd + 2u);
    if (p.split_len > 0u) {
        lo = lo + wg.z * p.split_len;
        if (lo > pos) {
            if (lid.x == 0u) {
                part[pb] = -1e30;
                part[pb + 1u] = 0.0;
            }
            return;
        }
        hi = min(pos, lo + p.split_len - 1u);
    }
    let qb = t * p.q_stride + h * p.hd;
    for (var d = lid.x; d < p.hd; d += 64u) {
        qs[d] = qkv[qb + d];
    }
    workgroupBarrier();
    var m = -1e30;
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var j0 = lo; j0 <= hi; j0 += 64u) {
        let j = j0 + lid.x;
        var s = -3.0e38;
        if (j <= hi) {
            var dd = 0.0;
            let kb = j * kvw + koff;
            for (var d = 0u; d < p.hd; d++) {
                dd += qs[d] * kc[kb + d];
            }
            s = dd * p.scale;
            if (p.softcap > 0.0) {
                s = p.softcap * safe_tanh(s / p.softcap);
            }
        }
        sc[lid.x] = s;
        workgroupBarrier();
        let n = min(64u, hi + 1u - j0);
        var mt = m;
        for (var jj = 0u; jj < n; jj++) {
            mt = max(mt, sc[jj]);
        }
        let corr = exp(m - mt);
        l *= corr;
        for (var r = 0u; r < 4u; r++) {
            acc[r] *= corr;
        }
        for (var jj = 0u; jj < n; jj++) {
            let pj = exp(sc[jj] - mt);
            l += pj;
            let vb = (j0 + jj) * kvw + koff;
            for (var r = 0u; r < 4u; r++) {
                let d = lid.x + 64u * r;
                if (d < p.hd) {
                    acc[r] += pj * vc[vb + d];
                }
            }
        }
        m = mt;
        workgroupBarrier();
    }
    if (p.split_len > 0u) {
        if (lid.x == 0u) {
            part[pb] = m;
            part[pb + 1u] = l;
        }
        for (var r = 0u; r < 4u; r++) {
            let d = lid.x + 64u * r;
            if (d < p.hd) {
                part[pb + 2u + d] = acc[r];
            }
        }
        return;
    }
    let ob = t * p.heads * p.hd + h * p.hd;
    for (var r = 0u; r < 4u; r++) {
        let d = lid.x + 64u * r;
        if (d < p.hd) {
            out[ob + d] = acc[r] / l;
        }
    }
}

// Causal softmax attention over the KV cache for each (head, token) of the
// step, with grouped-query heads, an optional sliding window, the score
// scale and an optional tanh softcap. The operands come through load_q,
// key4 and val4: attention_load.wgsl after qkv_prep, or
// attention_prep_load.wgsl with the prep fused in (one-token steps). Keys are visited in tiles of 64 with
// an online (running max) softmax, so any context length works with a fixed
// amount of workgroup memory. head_dim <= 256 and a multiple of 4 (q, k
// and v are read as vec4). Dispatch (heads, ntok, S).
//
// Latency, not bandwidth, bounds this kernel at decode (one workgroup per
// head), so no thread walks a long dependent chain: a score is a dot of
// vec4s (four independent sums), and the weighted sum of values is split
// over four key groups of 16 threads (each thread owns up to four vec4s of
// the output) that meet in workgroup memory at the end.
//
// split_len 0: one workgroup covers a token's whole span and writes out.
// split_len > 0 (split-K, "flash decoding"): workgroup z covers positions
// lo + z*L .. +L-1 of the span and writes its partial (running max, sum,
// unnormalized output) to part, so a long context is spread over many
// workgroups; attn_combine merges the partials. With sinks (gpt-oss),
// split 0 folds its head's sink into its partial, so the merge counts it
// once. L = splitSpan(span): the
// smallest multiple of split_len with which max_splits parts cover the
// span; attn_combine uses the same rule.
var<workgroup> qs: array<vec4<f32>, 64>;
var<workgroup> pw: array<f32, 64>;
var<workgroup> red: array<vec4<f32>, 256>;

fn splitSpan(span: u32) -> u32 {
    let even = (span + p.max_splits - 1u) / p.max_splits;
    return max(1u, (even + p.split_len - 1u) / p.split_len) * p.split_len;
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
    let hd4 = p.hd / 4u;
    let kvw4 = p.kv_heads * hd4;
    let koff4 = kvh * hd4;
    var lo = 0u;
    if (p.window > 0u && pos + 1u > p.window) {
        lo = pos + 1u - p.window;
    }
    var hi = pos;
    let pb = ((t * p.heads + h) * p.max_splits + wg.z) * (p.hd + 2u);
    if (p.split_len > 0u) {
        let sl = splitSpan(pos + 1u - lo);
        lo = lo + wg.z * sl;
        if (lo > pos) {
            if (lid.x == 0u) {
                part[pb] = -1e30;
                part[pb + 1u] = 0.0;
            }
            return;
        }
        hi = min(pos, lo + sl - 1u);
    }
    load_q(t, h, wg.z, lid.x);
    workgroupBarrier();
    let kg = lid.x / 16u; // key group of the value sum
    let dv = lid.x % 16u; // this thread's vec4s: dv, dv+16, dv+32, dv+48
    var m = -1e30;
    var l = 0.0;
    var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var j0 = lo; j0 <= hi; j0 += 64u) {
        let j = j0 + lid.x;
        let n = min(64u, hi + 1u - j0);
        var s = -3.0e38;
        if (lid.x < n) {
            let kb = kv_row(j) * kvw4 + koff4;
            var dd = vec4<f32>(0.0);
            for (var d = 0u; d < hd4; d++) {
                dd += qs[d] * key4(j, kb, d);
            }
            s = ((dd.x + dd.y) + (dd.z + dd.w)) * p.scale;
            if (p.softcap > 0.0) {
                s = p.softcap * safe_tanh(s / p.softcap);
            }
        }
        pw[lid.x] = s;
        workgroupBarrier();
        var mt = m;
        for (var jj = 0u; jj < n; jj++) {
            mt = max(mt, pw[jj]);
        }
        workgroupBarrier();
        pw[lid.x] = select(0.0, exp(s - mt), lid.x < n);
        workgroupBarrier();
        let corr = exp(m - mt);
        var ls = 0.0;
        for (var jj = 0u; jj < n; jj++) {
            ls += pw[jj];
        }
        l = l * corr + ls;
        for (var r = 0u; r < 4u; r++) {
            acc[r] *= corr;
        }
        for (var jj = kg; jj < n; jj += 4u) {
            let pj = pw[jj];
            let vb = kv_row(j0 + jj) * kvw4 + koff4;
            for (var r = 0u; r < 4u; r++) {
                let d4 = dv + 16u * r;
                if (d4 < hd4) {
                    acc[r] += pj * val4(j0 + jj, vb, d4);
                }
            }
        }
        m = mt;
        workgroupBarrier();
    }
    for (var r = 0u; r < 4u; r++) {
        red[kg * 64u + dv + 16u * r] = acc[r];
    }
    workgroupBarrier();
    if (kg != 0u) {
        return;
    }
    // The sink joins the denominator once: whole, or in split 0's partial.
    var sn = vec2<f32>(1.0, l);
    var ms = m;
    if (p.split_len == 0u || wg.z == 0u) {
        sn = sink_norm(h, m, l);
        if (p.has_sink != 0u) {
            ms = max(m, sink_load(p.sink_off, h));
        }
    }
    if (p.split_len > 0u && lid.x == 0u) {
        part[pb] = ms;
        part[pb + 1u] = sn.y;
    }
    let ob = t * p.heads * p.hd + h * p.hd;
    for (var r = 0u; r < 4u; r++) {
        let d4 = dv + 16u * r;
        if (d4 < hd4) {
            let v = (red[d4] + red[64u + d4]) + (red[128u + d4] + red[192u + d4]);
            if (p.split_len > 0u) {
                let o = pb + 2u + 4u * d4;
                let w = v * sn.x;
                part[o] = w.x;
                part[o + 1u] = w.y;
                part[o + 2u] = w.z;
                part[o + 3u] = w.w;
            } else {
                let o = ob + 4u * d4;
                let w = v * sn.x / sn.y;
                out[o] = w.x;
                out[o + 1u] = w.y;
                out[o + 2u] = w.z;
                out[o + 3u] = w.w;
            }
        }
    }
}

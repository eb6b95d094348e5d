// One head's prep (qkv_prep.wgsl, attention_prep_load.wgsl): ph holds the
// head's hd values; prep_head applies the per-head RMSNorm (q weights, or
// k weights from kn_off when is_k) and the rotary embedding at position
// pos, in place. The caller fills ph and puts a barrier before the call;
// prep_head ends with one. Uniform control flow only. Needs P's qk_norm,
// eps, plus_one, kn_off, rot, style and hd, and the bindings cs and qkn.
var<workgroup> ph: array<f32, 256>;
var<workgroup> ph_red: array<f32, 64>;

fn prep_head(is_k: bool, pos: u32, lid: u32) {
    if (p.qk_norm == 1u) {
        var ss = 0.0;
        for (var i = lid; i < p.hd; i += 64u) {
            ss += ph[i] * ph[i];
        }
        ph_red[lid] = ss;
        workgroupBarrier();
        for (var s = 32u; s > 0u; s >>= 1u) {
            if (lid < s) {
                ph_red[lid] += ph_red[lid + s];
            }
            workgroupBarrier();
        }
        let r = 1.0 / sqrt(ph_red[0] / f32(p.hd) + p.eps);
        let woff = select(0u, p.kn_off, is_k);
        for (var i = lid; i < p.hd; i += 64u) {
            var g = qkn[woff + i];
            if (p.plus_one == 1u) {
                g += 1.0;
            }
            ph[i] = ph[i] * r * g;
        }
        workgroupBarrier();
    }
    if (p.rot > 0u) {
        let half = p.rot / 2u;
        for (var i = lid; i < half; i += 64u) {
            var a = i;
            var b = i + half;
            if (p.style == 1u) {
                a = 2u * i;
                b = 2u * i + 1u;
            }
            let c = cs[pos * half + i];
            let xa = ph[a];
            let xb = ph[b];
            ph[a] = xa * c.x - xb * c.y;
            ph[b] = xb * c.x + xa * c.y;
        }
        workgroupBarrier();
    }
}

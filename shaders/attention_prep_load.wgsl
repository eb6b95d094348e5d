// attention.wgsl's operands with qkv_prep fused in, for one-token steps:
// every workgroup of head h normalizes and rotates its q head itself, and
// the key and value of the step's own position come from qkv (normalized,
// rotated, rounded as the cache would keep them) instead of the cache,
// which split 0 of the kv head's first q head appends them to. Nothing in
// the dispatch reads that cache row (older positions only), and later
// dispatches see the write, so the result is bit for bit qkv_prep's then
// attention's.
var<workgroup> kn: array<vec4<f32>, 64>;
var<workgroup> vn: array<vec4<f32>, 64>;
var<private> cur: u32; // the step's position

fn load_q(t: u32, h: u32, z: u32, lid: u32) {
    let pos = step[0] + t;
    cur = pos;
    let hd4 = p.hd / 4u;
    let g = h / (p.heads / p.kv_heads);
    let kb4 = (t * p.q_stride) / 4u + (p.heads + g) * hd4;
    let vb4 = kb4 + p.kv_heads * hd4;
    // The key: normalized and rotated as qkv_prep does.
    for (var d = lid; d < hd4; d += 64u) {
        let v = qkv[kb4 + d];
        ph[4u * d] = v.x;
        ph[4u * d + 1u] = v.y;
        ph[4u * d + 2u] = v.z;
        ph[4u * d + 3u] = v.w;
    }
    workgroupBarrier();
    prep_head(true, pos, lid);
    for (var d = lid; d < hd4; d += 64u) {
        kn[d] = kv_round(vec4<f32>(ph[4u * d], ph[4u * d + 1u], ph[4u * d + 2u], ph[4u * d + 3u]));
        vn[d] = kv_round(qkv[vb4 + d]);
    }
    workgroupBarrier();
    // The query.
    let qb4 = (t * p.q_stride) / 4u + h * hd4;
    for (var d = lid; d < hd4; d += 64u) {
        let v = qkv[qb4 + d];
        ph[4u * d] = v.x;
        ph[4u * d + 1u] = v.y;
        ph[4u * d + 2u] = v.z;
        ph[4u * d + 3u] = v.w;
    }
    workgroupBarrier();
    prep_head(false, pos, lid);
    for (var d = lid; d < hd4; d += 64u) {
        qs[d] = vec4<f32>(ph[4u * d], ph[4u * d + 1u], ph[4u * d + 2u], ph[4u * d + 3u]);
    }
    // The cache append, once per kv head.
    if (z == 0u && h % (p.heads / p.kv_heads) == 0u) {
        var row = pos;
        if (p.kv_len > 0u) {
            row = pos % p.kv_len;
        }
        let o = row * p.kv_heads * p.hd + g * p.hd;
        for (var i = 2u * lid; i < p.hd; i += 128u) {
            store_k(o + i, kn[i / 4u][i % 4u], kn[i / 4u][i % 4u + 1u]);
            store_v(o + i, vn[i / 4u][i % 4u], vn[i / 4u][i % 4u + 1u]);
        }
    }
}

fn key4(j: u32, kb: u32, d: u32) -> vec4<f32> {
    if (j == cur) {
        return kn[d];
    }
    return k4(kb + d);
}

fn val4(j: u32, vb: u32, d: u32) -> vec4<f32> {
    if (j == cur) {
        return vn[d];
    }
    return v4(vb + d);
}

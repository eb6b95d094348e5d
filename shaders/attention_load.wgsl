// How attention.wgsl reads its operands when qkv_prep has run before it:
// the step's q head (rotated) from qkv, keys and values from the cache.
fn load_q(t: u32, h: u32, z: u32, lid: u32) {
    let qb4 = (t * p.q_stride + h * p.hd) / 4u;
    for (var d = lid; d < p.hd / 4u; d += 64u) {
        qs[d] = qkv[qb4 + d];
    }
}

// key4 and val4 are the d-th vec4 of position j's key and value, whose
// cache row starts at vec4 kb.
fn key4(j: u32, kb: u32, d: u32) -> vec4<f32> {
    return k4(kb + d);
}

fn val4(j: u32, vb: u32, d: u32) -> vec4<f32> {
    return v4(vb + d);
}

// Merges the split-K partials of attention (see attention.wgsl) for each
// (head, token): out = Σ_z acc_z·e^(m_z-M) / Σ_z l_z·e^(m_z-M), M = max m_z,
// over the splits that cover the token's span. Dispatch (heads, ntok, 1).
//!P CombineParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> part: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step[1]) {
        return;
    }
    let pos = step[0] + t;
    var span = pos + 1u;
    if (p.window > 0u) {
        span = min(span, p.window);
    }
    // The split span of attention.wgsl's splitSpan.
    let even = (span + p.max_splits - 1u) / p.max_splits;
    let sl = max(1u, (even + p.split_len - 1u) / p.split_len) * p.split_len;
    let ns = min((span + sl - 1u) / sl, p.max_splits);
    let base = (t * p.heads + h) * p.max_splits * (p.hd + 2u);
    var mx = -1e30;
    for (var z = 0u; z < ns; z++) {
        mx = max(mx, part[base + z * (p.hd + 2u)]);
    }
    var l = 0.0;
    for (var z = 0u; z < ns; z++) {
        let pz = base + z * (p.hd + 2u);
        l += part[pz + 1u] * exp(part[pz] - mx);
    }
    let ob = t * p.heads * p.hd + h * p.hd;
    for (var d = lid.x; d < p.hd; d += 64u) {
        var o = 0.0;
        for (var z = 0u; z < ns; z++) {
            let pz = base + z * (p.hd + 2u);
            o += part[pz + 2u + d] * exp(part[pz] - mx);
        }
        out[ob + d] = o / l;
    }
}

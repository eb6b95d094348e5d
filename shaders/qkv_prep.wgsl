// After the q/k/v projections: per-head q/k RMSNorm (optional), rotary
// embedding of q and k, and the KV-cache append of k and v, in one dispatch.
// The activation row of token t is [q heads | k heads | v heads], stride
// (heads + 2*kv_heads)*head_dim. Workgroup (h, t): h < heads is a q head
// (rotated in place), then the k heads (rotated, written to kc at the
// token's position), then the v heads (copied to vc).
//
// cs holds (cos, sin) per position and rotary pair, computed on the host in
// float64 from the float32 angle (GPU sin/cos are not accurate enough).
// style 0 = NeoX pairs (i, i+rot/2), 1 = interleaved pairs (2i, 2i+1).
// Dispatch (heads + 2*kv_heads, ntok, 1).
//!P PrepParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>;
// Bindings 3 and 4 (kc, vc) and their stores store_k/store_v come from
// the KV codec prelude (kv_write_f32.wgsl, kv_write_f16.wgsl).
@group(0) @binding(5) var<storage, read> cs: array<vec2<f32>>;
@group(0) @binding(6) var<storage, read> qkn: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step[1]) {
        return;
    }
    let pos = step[0] + t;
    let stride = (p.heads + 2u * p.kv_heads) * p.hd;
    let base = t * stride + h * p.hd;
    let is_v = h >= p.heads + p.kv_heads;
    let is_k = h >= p.heads && !is_v;
    for (var i = lid.x; i < p.hd; i += 64u) {
        ph[i] = qkv[base + i];
    }
    workgroupBarrier();
    if (!is_v) {
        prep_head(is_k, pos, lid.x);
    }
    let kvw = p.kv_heads * p.hd;
    var row = pos;
    if (p.kv_len > 0u) {
        row = pos % p.kv_len;
    }
    if (is_v) {
        let o = row * kvw + (h - p.heads - p.kv_heads) * p.hd;
        for (var i = 2u * lid.x; i < p.hd; i += 128u) {
            store_v(o + i, ph[i], ph[i + 1u]);
        }
    } else if (is_k) {
        let o = row * kvw + (h - p.heads) * p.hd;
        for (var i = 2u * lid.x; i < p.hd; i += 128u) {
            store_k(o + i, ph[i], ph[i + 1u]);
        }
    } else {
        for (var i = lid.x; i < p.hd; i += 64u) {
            qkv[base + i] = ph[i];
        }
    }
}

// The interface both attention kernels share (attention.wgsl for short
// steps and split-K decode, attn_prefill.wgsl for long steps): one bind
// group layout and uniform, so a session binds a layer's attention once and
// dispatches whichever kernel suits the step.
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
    kv_len: u32,     // rows of kc/vc: position j lives in row j % kv_len (a sliding-window ring); 0 = row j
    _p1: u32,
    _p2: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;
// Bindings 3 and 4 (kc, vc) and their loads k4/v4 come from the KV codec
// prelude (kv_read_f32.wgsl, kv_read_f16.wgsl).
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;

// kv_row is the cache row of position j.
fn kv_row(j: u32) -> u32 {
    if (p.kv_len == 0u) {
        return j;
    }
    return j % p.kv_len;
}

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

// The interface both attention kernels share (attention.wgsl for short
// steps and split-K decode, attn_prefill.wgsl for long steps): one bind
// group layout and uniform, so a session binds a layer's attention once and
// dispatches whichever kernel suits the step.
//!P AttnParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;
// Bindings 3 and 4 (kc, vc) and their loads k4/v4 come from the KV codec
// prelude (kv_read_f32.wgsl, kv_read_f16.wgsl).
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;

// sink_norm folds head h's sink into a softmax with running max m and sum
// l: it returns (scale, denominator) so that out = acc·scale / denominator,
// computed against max(m, sink) so that neither exponential overflows.
fn sink_norm(h: u32, m: f32, l: f32) -> vec2<f32> {
    if (p.has_sink == 0u) {
        return vec2<f32>(1.0, l);
    }
    let sk = sink_load(p.sink_off, h);
    let mm = max(m, sk);
    let c = exp(m - mm);
    return vec2<f32>(c, l * c + exp(sk - mm));
}

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

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
    has_sink: u32,   // 1: head h's sink logit joins each softmax's denominator (gpt-oss)
    sink_off: u32,   // the sinks' vec4 offset in kc (after the cache's last position)
    _p2: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;

// sink_norm folds head h's sink into a softmax with running max m and sum
// l: it returns (scale, denominator) so that out = acc·scale / denominator,
// computed against max(m, sink) so that neither exponential overflows.
fn sink_norm(h: u32, m: f32, l: f32) -> vec2<f32> {
    if (p.has_sink == 0u) {
        return vec2<f32>(1.0, l);
    }
    let sk = kc[p.sink_off + h / 4u][h % 4u];
    let mm = max(m, sk);
    let c = exp(m - mm);
    return vec2<f32>(c, l * c + exp(sk - mm));
}

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

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

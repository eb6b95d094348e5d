// The interface of attention_prep: attention.wgsl for one-token steps with
// qkv_prep's work fused in (attention_prep_load.wgsl), so a decode step
// spends one dispatch less per layer. Bindings as attention_io.wgsl's, the
// cache read-write (the step's row is appended here), plus qkv_prep's
// rotary table and per-head norm weights.
//!P AttnPrepParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;
// Bindings 3 and 4 (kc, vc) come from kv_rw_f32.wgsl or kv_rw_f16.wgsl.
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;
@group(0) @binding(7) var<storage, read> cs: array<vec2<f32>>;
@group(0) @binding(8) var<storage, read> qkn: array<f32>;

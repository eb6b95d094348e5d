// Gated FFN activation: out[t, i] = act(gate_i) * up_i over a row of gu
// (width 2f): the gate projection then the up projection, or with
// interleaved = 1 the two alternating (gate_0, up_0, gate_1, ...).
// act 0 = SiLU, 1 = GELU (tanh approximation). Dispatch (ceil(f/64), ntok, 1).
//!P ActMulParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> gu: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn safe_tanh(v: f32) -> f32 {
    let c = clamp(v, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.y;
    let i = wg.x * 64u + lid.x;
    if (t >= step[1] || i >= p.f) {
        return;
    }
    var g = gu[t * 2u * p.f + i];
    var u = gu[t * 2u * p.f + p.f + i];
    if (p.interleaved == 1u) {
        g = gu[t * 2u * p.f + 2u * i];
        u = gu[t * 2u * p.f + 2u * i + 1u];
    }
    var a: f32;
    if (p.act == 1u) {
        a = 0.5 * g * (1.0 + safe_tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    } else {
        a = g / (1.0 + exp(-g));
    }
    out[t * p.f + i] = a * u;
}

// Gated FFN activation: out[t, i] = act(gu[t, i]) * gu[t, f + i], where a
// row of gu holds the gate projection then the up projection (width 2f).
// act 0 = SiLU, 1 = GELU (tanh approximation). Dispatch (ceil(f/64), ntok, 1).
struct P {
    f: u32,
    act: u32,
    _p0: u32,
    _p1: u32,
}
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
    let g = gu[t * 2u * p.f + i];
    let u = gu[t * 2u * p.f + p.f + i];
    var a: f32;
    if (p.act == 1u) {
        a = 0.5 * g * (1.0 + safe_tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    } else {
        a = g / (1.0 + exp(-g));
    }
    out[t * p.f + i] = a * u;
}

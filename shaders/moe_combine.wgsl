// Sum of a routed MoE FFN: v = Σ_j wts[t*k+j]·y[(t*k+j)*h + i], plus the
// shared expert's row shy[t*h + i] (scaled by sigmoid(shg[t]) when
// shared_gate is set). mode 0: out[t*h+i] = v; mode 1: out[t*h+i] += alpha*v
// (the residual add). Dispatch (ceil(h/64), ntok, 1).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P MoECombineParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> wts: array<f32>;
@group(0) @binding(4) var<storage, read> shy: array<f32>;
@group(0) @binding(5) var<storage, read> shg: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.y;
    let i = wg.x * 64u + lid.x;
    if (t >= step[1] || i >= p.h) {
        return;
    }
    var v = 0.0;
    for (var j = 0u; j < p.k; j++) {
        let slot = t * p.k + j;
        v += wts[slot] * y[slot * p.h + i];
    }
    if (p.has_shared == 1u) {
        var s = shy[t * p.h + i];
        if (p.shared_gate == 1u) {
            s *= 1.0 / (1.0 + exp(-shg[t]));
        }
        v += s;
    }
    let o = t * p.h + i;
    if (p.mode == 1u) {
        out[o] += p.alpha * v;
    } else {
        out[o] = v;
    }
}

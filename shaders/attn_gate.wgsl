// Attention output gate (qwen3_next): att[t*w + i] *= sigmoid(gate[t*w + i]).
// Dispatch (ceil(w/64), ntok, 1).
// 48 bytes, the largest parameter block: see hybridParam in webgpu/hybrid.go.
//!P AttnGateParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> gate: array<f32>;
@group(0) @binding(3) var<storage, read_write> att: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.y;
    let i = wg.x * 64u + lid.x;
    if (t >= step[1] || i >= p.w) {
        return;
    }
    let o = t * p.w + i;
    att[o] = att[o] / (1.0 + exp(-gate[o]));
}

// Embedding gather: out[t, :] = row(tokens[t]) * scale for t < step.ntok.
// Dispatch (ceil(hidden/4/64), ntok, 1).
//!P EmbedParams (the uniform, generated from the Go params struct)
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> tokens: array<u32>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.y;
    let j = wg.x * 64u + lid.x;
    let h4 = p.hidden / 4u;
    if (t >= step[1] || j >= h4) {
        return;
    }
    let tok = tokens[p.tok_off + t];
    out[t * h4 + j] = fetch4(tok * p.hidden + j * 4u, p.soff) * p.scale;
}

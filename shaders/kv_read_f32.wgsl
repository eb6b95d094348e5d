// KV cache codec f32 (read side, the attention kernels): one f32 per
// element; k4/v4 load the i-th vec4 of a cache.
@group(0) @binding(3) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> vc: array<vec4<f32>>;

fn k4(i: u32) -> vec4<f32> {
    return kc[i];
}

fn v4(i: u32) -> vec4<f32> {
    return vc[i];
}

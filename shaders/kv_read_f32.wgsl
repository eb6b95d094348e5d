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

// sink_load reads head h's attention sink (gpt-oss), stored as float32 bits
// after the cache's last row, from element off of kc on.
fn sink_load(off: u32, h: u32) -> f32 {
    return kc[off + h / 4u][h % 4u];
}

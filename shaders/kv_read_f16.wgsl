// KV cache codec f16 (read side, the attention kernels): two halves per
// u32 (pack2x16float), so the i-th vec4 of a cache is the i-th vec2<u32>.
@group(0) @binding(3) var<storage, read> kc: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> vc: array<vec2<u32>>;

fn k4(i: u32) -> vec4<f32> {
    let w = kc[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn v4(i: u32) -> vec4<f32> {
    let w = vc[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// sink_load reads head h's attention sink (gpt-oss), stored as float32 bits
// after the cache's last row, from element off of kc on.
fn sink_load(off: u32, h: u32) -> f32 {
    return bitcast<f32>(kc[off + h / 2u][h % 2u]);
}

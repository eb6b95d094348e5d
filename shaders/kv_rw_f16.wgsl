// KV cache codec f16 (both sides, attention_prep): two halves per u32
// (pack2x16float), so the i-th vec4 of a cache is the i-th vec2<u32>;
// store_k/store_v write elements i and i+1 (i even) as one u32, and
// kv_round is what a store keeps of a value.
@group(0) @binding(3) var<storage, read_write> kc: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> vc: array<vec2<u32>>;

fn k4(i: u32) -> vec4<f32> {
    let w = kc[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn v4(i: u32) -> vec4<f32> {
    let w = vc[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn store_k(i: u32, a: f32, b: f32) {
    kc[i / 4u][(i / 2u) % 2u] = pack2x16float(vec2<f32>(a, b));
}

fn store_v(i: u32, a: f32, b: f32) {
    vc[i / 4u][(i / 2u) % 2u] = pack2x16float(vec2<f32>(a, b));
}

fn kv_round(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(pack2x16float(x.xy)), unpack2x16float(pack2x16float(x.zw)));
}

fn sink_load(off: u32, h: u32) -> f32 {
    return bitcast<f32>(kc[off + h / 2u][h % 2u]);
}

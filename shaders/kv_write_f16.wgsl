// KV cache codec f16 (write side, qkv_prep): elements i and i+1 (i even)
// are the two halves of u32 i/2 (pack2x16float: the low half is i).
@group(0) @binding(3) var<storage, read_write> kc: array<u32>;
@group(0) @binding(4) var<storage, read_write> vc: array<u32>;

fn store_k(i: u32, a: f32, b: f32) {
    kc[i / 2u] = pack2x16float(vec2<f32>(a, b));
}

fn store_v(i: u32, a: f32, b: f32) {
    vc[i / 2u] = pack2x16float(vec2<f32>(a, b));
}

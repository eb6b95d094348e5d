// KV cache codec f32 (write side, qkv_prep): store_k/store_v write
// elements i and i+1 (i even) of a cache.
@group(0) @binding(3) var<storage, read_write> kc: array<f32>;
@group(0) @binding(4) var<storage, read_write> vc: array<f32>;

fn store_k(i: u32, a: f32, b: f32) {
    kc[i] = a;
    kc[i + 1u] = b;
}

fn store_v(i: u32, a: f32, b: f32) {
    vc[i] = a;
    vc[i + 1u] = b;
}

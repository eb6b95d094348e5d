// KV cache codec f32 (both sides, attention_prep: it reads the cache and
// appends the step's row): k4/v4 load the i-th vec4, store_k/store_v write
// elements i and i+1 (i even), kv_round is what a store keeps of a value.
@group(0) @binding(3) var<storage, read_write> kc: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> vc: array<vec4<f32>>;

fn k4(i: u32) -> vec4<f32> {
    return kc[i];
}

fn v4(i: u32) -> vec4<f32> {
    return vc[i];
}

fn store_k(i: u32, a: f32, b: f32) {
    kc[i / 4u][i % 4u] = a;
    kc[i / 4u][i % 4u + 1u] = b;
}

fn store_v(i: u32, a: f32, b: f32) {
    vc[i / 4u][i % 4u] = a;
    vc[i / 4u][i % 4u + 1u] = b;
}

fn kv_round(x: vec4<f32>) -> vec4<f32> {
    return x;
}

fn sink_load(off: u32, h: u32) -> f32 {
    return kc[off + h / 4u][h % 4u];
}

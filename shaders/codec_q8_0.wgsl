// q8_0 weights, repacked at upload into two aligned planes (GGUF's 34-byte
// blocks are not 4-byte aligned): the quant plane holds each block's 32 int8
// (element e is byte e of the plane), the scale plane starts at u32 `soff`
// and holds the blocks' f16 scales two per u32. The bytes are GGUF's, only
// reordered, so the values are exactly GGUF's. One vec4<u32> of quants is 16
// elements (half a block).
const CHUNK: u32 = 16u;

fn q8scale(b: u32, soff: u32) -> f32 {
    let i = soff + b / 2u;
    let d2 = unpack2x16float(w[i / 4u][i % 4u]);
    return select(d2.x, d2.y, (b & 1u) == 1u);
}

fn q8x4(q: u32) -> vec4<f32> {
    return vec4<f32>(vec4<i32>(bitcast<i32>(q << 24u) >> 24u, bitcast<i32>(q << 16u) >> 24u,
                               bitcast<i32>(q << 8u) >> 24u, bitcast<i32>(q) >> 24u));
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    return q8x4(w[e / 16u][(e / 4u) % 4u]) * q8scale(e / 32u, soff);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let q = w[e / 16u];
    let d = q8scale(e / 32u, soff);
    return array<vec4<f32>, 4>(q8x4(q.x) * d, q8x4(q.y) * d, q8x4(q.z) * d, q8x4(q.w) * d);
}

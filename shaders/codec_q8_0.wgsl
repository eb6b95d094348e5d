// q8_0 weights, repacked at upload into two aligned planes (GGUF's 34-byte
// blocks are not 4-byte aligned): the quant plane holds each block's 32 int8
// as 8 u32 (so element e lives in u32 e/4, byte e%4), the scale plane starts
// at u32 `soff` and holds the blocks' f16 scales two per u32. The bytes are
// GGUF's, only reordered, so the values are exactly GGUF's.
fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let q = w[e / 4u];
    let b = e / 32u;
    let d2 = unpack2x16float(w[soff + b / 2u]);
    let d = select(d2.x, d2.y, (b & 1u) == 1u);
    let v = vec4<i32>(bitcast<i32>(q << 24u) >> 24u, bitcast<i32>(q << 16u) >> 24u,
                      bitcast<i32>(q << 8u) >> 24u, bitcast<i32>(q) >> 24u);
    return vec4<f32>(v) * d;
}

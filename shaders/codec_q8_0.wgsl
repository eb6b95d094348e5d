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

// Four int8 from one u32, exactly, without int-to-float conversion: the
// sign flip maps v to v+128 in 0..255, OR-ed into the mantissa of 2^23.
fn q8x4(q: u32) -> vec4<f32> {
    let b = q ^ 0x80808080u;
    let u = vec4<u32>(b & 0xFFu, (b >> 8u) & 0xFFu, (b >> 16u) & 0xFFu, b >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388736.0);
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    return q8x4(w[e / 16u][(e / 4u) % 4u]) * q8scale(e / 32u, soff);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let q = w[e / 16u];
    let d = q8scale(e / 32u, soff);
    return array<vec4<f32>, 4>(q8x4(q.x) * d, q8x4(q.y) * d, q8x4(q.z) * d, q8x4(q.w) * d);
}

// fetchq and chunkscale split fetchc (see codec_f32.wgsl): the int8
// values, and the block scale applied once per chunk sum.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let q = w[e / 16u];
    return array<vec4<f32>, 4>(q8x4(q.x), q8x4(q.y), q8x4(q.z), q8x4(q.w));
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return q8scale(e / 32u, soff);
}

// chunkscales is (chunkscale, 0): this codec's values are its quants times
// the chunk scale, with no offset (AFFINE is false).
const AFFINE: bool = false;

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

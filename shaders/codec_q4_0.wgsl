// q4_0 weights, repacked at upload like q8_0: the quant plane holds each
// block's 16 nibble bytes (one vec4<u32> per block), the scale plane (from
// u32 `soff`) the f16 scales two per u32. Within a block, element j < 16 is
// the low nibble of byte j and element j+16 its high nibble; the value is
// (nibble-8)*d. One vec4<u32> is a whole 32-element block.
const CHUNK: u32 = 32u;

fn q4scale(b: u32, soff: u32) -> f32 {
    let i = soff + b / 2u;
    let d2 = unpack2x16float(w[i / 4u][i % 4u]);
    return select(d2.x, d2.y, (b & 1u) == 1u);
}

// n holds four values 0..15, one per byte. OR-ing a byte into the mantissa
// of 2^23 and subtracting 2^23+8 gives byte-8 exactly with integer-logic
// and one add, no int-to-float conversion (a quarter-rate instruction on
// NVIDIA that bounded the matvec).
fn q4x4(n: u32, d: f32) -> vec4<f32> {
    let u = vec4<u32>(n & 0xFFu, (n >> 8u) & 0xFFu, (n >> 16u) & 0xFFu, n >> 24u) | vec4<u32>(0x4B000000u);
    return (bitcast<vec4<f32>>(u) - vec4<f32>(8388616.0)) * d;
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let b = e / 32u;
    let j = e % 32u;
    let q = w[b][(j % 16u) / 4u];
    return q4x4((q >> select(0u, 4u, j >= 16u)) & 0x0F0F0F0Fu, q4scale(b, soff));
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = e / 32u;
    let q = w[b];
    let d = q4scale(b, soff);
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q4x4(q.x & m, d), q4x4(q.y & m, d), q4x4(q.z & m, d), q4x4(q.w & m, d),
        q4x4((q.x >> 4u) & m, d), q4x4((q.y >> 4u) & m, d), q4x4((q.z >> 4u) & m, d), q4x4((q.w >> 4u) & m, d));
}

// fetchq and chunkscale split fetchc (see codec_f32.wgsl): the values
// nibble-8, and the block scale applied once per chunk sum.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let q = w[e / 32u];
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q4x4(q.x & m, 1.0), q4x4(q.y & m, 1.0), q4x4(q.z & m, 1.0), q4x4(q.w & m, 1.0),
        q4x4((q.x >> 4u) & m, 1.0), q4x4((q.y >> 4u) & m, 1.0), q4x4((q.z >> 4u) & m, 1.0), q4x4((q.w >> 4u) & m, 1.0));
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return q4scale(e / 32u, soff);
}

// chunkscales is (chunkscale, 0): this codec's values are its quants times
// the chunk scale, with no offset (AFFINE is false).
const AFFINE: bool = false;

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

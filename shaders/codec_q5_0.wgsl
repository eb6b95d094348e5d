// q5_0 weights: GGUF's 22-byte blocks of 32, each laid out in 32 bytes at
// upload (PadBlocks): the 16 nibble bytes first (element j < 16 the low
// nibble of byte j, j + 16 its high nibble), then the 32 fifth bits as a
// u32 (bit j for element j), then the half-precision d. x = d·(q − 16)
// exactly as GGUF (and the CPU engine) decode it. One block is two
// vec4<u32> and one CHUNK.
const CHUNK: u32 = 32u;

fn q5scale(b: u32) -> f32 {
    return unpack2x16float(w[2u * b + 1u].y).x;
}

// q5x4 decodes four elements: nibbles n (one per byte) and their fifth
// bits h (bits 0..3), by the float trick of codec_q4_0.wgsl with the −16
// folded into the subtraction.
fn q5x4(n: u32, h: u32, d: f32) -> vec4<f32> {
    let hb = ((h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u)) << 4u;
    let v = n | hb;
    let u = vec4<u32>(v & 0xFFu, (v >> 8u) & 0xFFu, (v >> 16u) & 0xFFu, v >> 24u) | vec4<u32>(0x4B000000u);
    return (bitcast<vec4<f32>>(u) - vec4<f32>(8388624.0)) * d;
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let b = e / 32u;
    let j = e % 32u;
    let q = w[2u * b][(j % 16u) / 4u];
    let qh = w[2u * b + 1u].x;
    return q5x4((q >> select(0u, 4u, j >= 16u)) & 0x0F0F0F0Fu, (qh >> j) & 0xFu, q5scale(b));
}

fn q5block(b: u32, d: f32) -> array<vec4<f32>, 8> {
    let q = w[2u * b];
    let qh = w[2u * b + 1u].x;
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q5x4(q.x & m, qh & 0xFu, d), q5x4(q.y & m, (qh >> 4u) & 0xFu, d),
        q5x4(q.z & m, (qh >> 8u) & 0xFu, d), q5x4(q.w & m, (qh >> 12u) & 0xFu, d),
        q5x4((q.x >> 4u) & m, (qh >> 16u) & 0xFu, d), q5x4((q.y >> 4u) & m, (qh >> 20u) & 0xFu, d),
        q5x4((q.z >> 4u) & m, (qh >> 24u) & 0xFu, d), q5x4((q.w >> 4u) & m, qh >> 28u, d));
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    return q5block(e / 32u, q5scale(e / 32u));
}

// fetchq and chunkscale split fetchc: the values q − 16, and the block
// scale applied once per chunk sum.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    return q5block(e / 32u, 1.0);
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return q5scale(e / 32u);
}

// chunkscales is (chunkscale, 0): this codec's values are its quants times
// the chunk scale, with no offset (AFFINE is false).
const AFFINE: bool = false;

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

// q5_0 weights, repacked at upload into two planes: the quant plane holds
// each 32-element block's 16 nibble bytes (one vec4<u32>; element j < 16
// the low nibble of byte j, j + 16 its high nibble), the scale plane (from
// u32 `soff`) 6 bytes per block: the 32 fifth bits (bit j for element j),
// then the half-precision d, two blocks per three u32. x = d·(q − 16)
// exactly as GGUF (and the CPU engine) decode it. One vec4<u32> is a whole
// block and one CHUNK.
const CHUNK: u32 = 32u;

fn word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

// head is block b's scale-plane entry: (fifth bits, d's bits in the low
// half). An even block's entry starts on a word, an odd one's mid word.
fn head(b: u32, soff: u32) -> vec2<u32> {
    let i = soff + 3u * (b / 2u) + (b & 1u);
    let a = word(i);
    let c = word(i + 1u);
    return select(vec2<u32>((a >> 16u) | (c << 16u), c >> 16u), vec2<u32>(a, c), (b & 1u) == 0u);
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
    let h = head(b, soff);
    let q = w[b][(j % 16u) / 4u];
    return q5x4((q >> select(0u, 4u, j >= 16u)) & 0x0F0F0F0Fu, (h.x >> j) & 0xFu, unpack2x16float(h.y).x);
}

fn q5block(b: u32, qh: u32, d: f32) -> array<vec4<f32>, 8> {
    let q = w[b];
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q5x4(q.x & m, qh & 0xFu, d), q5x4(q.y & m, (qh >> 4u) & 0xFu, d),
        q5x4(q.z & m, (qh >> 8u) & 0xFu, d), q5x4(q.w & m, (qh >> 12u) & 0xFu, d),
        q5x4((q.x >> 4u) & m, (qh >> 16u) & 0xFu, d), q5x4((q.y >> 4u) & m, (qh >> 20u) & 0xFu, d),
        q5x4((q.z >> 4u) & m, (qh >> 24u) & 0xFu, d), q5x4((q.w >> 4u) & m, qh >> 28u, d));
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = e / 32u;
    let h = head(b, soff);
    return q5block(b, h.x, unpack2x16float(h.y).x);
}

// fetchq and chunkscale split fetchc: the values q − 16, and the block
// scale applied once per chunk sum.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = e / 32u;
    return q5block(b, head(b, soff).x, 1.0);
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return unpack2x16float(head(e / 32u, soff).y).x;
}

// chunkscales is (chunkscale, 0): this codec's values are its quants times
// the chunk scale, with no offset (AFFINE is false).
const AFFINE: bool = false;

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

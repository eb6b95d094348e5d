// q4_1 weights, repacked at upload into two planes: the quant plane holds
// each 32-element block's 16 nibble bytes (one vec4<u32>; element j < 16
// the low nibble of byte j, j + 16 its high nibble), the scale plane (from
// u32 `soff`) one u32 per block, its half-precision d and m. x = d·q + m,
// so the chunk scales are (d, −m) (AFFINE). One vec4<u32> is a whole block
// and one CHUNK.
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

// q4w is four raw values: nibble bytes n (0..15) with fifth bits h (bits
// 0..3) on top, by the float trick of codec_q4_0.wgsl.
fn q4w(n: u32, h: u32) -> vec4<f32> {
    let v = n | (((h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u)) << 4u);
    let u = vec4<u32>(v & 0xFFu, (v >> 8u) & 0xFFu, (v >> 16u) & 0xFFu, v >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388608.0);
}

// blockq is a block's 32 raw values from its four words of nibbles k
// (element 4i.. in the low nibbles of word i, 16+4i.. in the high) and its
// fifth bits qh.
fn blockq(k: vec4<u32>, qh: u32) -> array<vec4<f32>, 8> {
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q4w(k.x & m, qh & 0xFu), q4w(k.y & m, (qh >> 4u) & 0xFu),
        q4w(k.z & m, (qh >> 8u) & 0xFu), q4w(k.w & m, (qh >> 12u) & 0xFu),
        q4w((k.x >> 4u) & m, (qh >> 16u) & 0xFu), q4w((k.y >> 4u) & m, (qh >> 20u) & 0xFu),
        q4w((k.z >> 4u) & m, (qh >> 24u) & 0xFu), q4w((k.w >> 4u) & m, qh >> 28u));
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    return blockq(w[e / 32u], 0u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let i = soff + e / 32u;
    let dm = unpack2x16float(w[i / 4u][i % 4u]);
    return vec2<f32>(dm.x, -dm.y);
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return chunkscales(e, soff).x;
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let j = e % 32u;
    let n = (w[e / 32u][(j % 16u) / 4u] >> select(0u, 4u, j >= 16u)) & 0x0F0F0F0Fu;
    let sm = chunkscales(e, soff);
    return q4w(n, 0u) * sm.x - vec4<f32>(sm.y);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let sm = chunkscales(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 8u; i++) {
        r[i] = r[i] * sm.x - vec4<f32>(sm.y);
    }
    return r;
}

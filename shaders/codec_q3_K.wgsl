// q3_K weights: GGUF's 110-byte super-blocks of 256, each padded to 112
// bytes at upload (PadBlocks): 32 bytes of high-bit mask, 64 bytes of bit
// pairs, 12 bytes of packed 6-bit scales, f16 d. Element p of a block:
// pair (p%128)/32 of byte 32 + 32·(p/128) + p%32, mask bit p/32 of byte
// p%32 (clear: minus 4); scale p/16. x = d·(sc−32)·q. A CHUNK is 16
// elements, one scale's: one vec4 of quants and one of the mask.
const BLK: u32 = 256u;
const PADV: u32 = 7u;
const CHUNK: u32 = 16u;
const AFFINE: bool = false;

// bytes4 is the four bytes of v as floats (the float trick of
// codec_q4_0.wgsl) minus off.
fn bytes4(v: u32, off: f32) -> vec4<f32> {
    let u = vec4<u32>(v & 0xFFu, (v >> 8u) & 0xFFu, (v >> 16u) & 0xFFu, v >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388608.0 + off);
}

// fetchq is a chunk's 16 values: bit pairs from one vec4 of quants, mask
// bits (set: +4) from one vec4 of the mask, minus 4.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let b = 7u * (e / 256u);
    let p = e % 256u;
    let half = (p % 32u) / 16u;
    let q = w[b + 2u + 2u * (p / 128u) + half];
    let h = w[b + half];
    let sh = 2u * ((p % 128u) / 32u);
    let hs = p / 32u;
    let m = 0x03030303u;
    let o = 0x01010101u;
    return array<vec4<f32>, 4>(
        bytes4(((q.x >> sh) & m) | (((h.x >> hs) & o) << 2u), 4.0),
        bytes4(((q.y >> sh) & m) | (((h.y >> hs) & o) << 2u), 4.0),
        bytes4(((q.z >> sh) & m) | (((h.z >> hs) & o) << 2u), 4.0),
        bytes4(((q.w >> sh) & m) | (((h.w >> hs) & o) << 2u), 4.0));
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    var q = fetchq(e - e % 16u, soff);
    let sm = chunkscales(e, soff);
    return q[(e % 16u) / 4u] * sm.x - vec4<f32>(sm.y);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let sm = chunkscales(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 4u; i++) {
        r[i] = r[i] * sm.x - vec4<f32>(sm.y);
    }
    return r;
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return chunkscales(e, soff).x;
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let i = (e % 256u) / 16u;
    let lo = (wbyte(b, 96u + i % 8u) >> (4u * (i / 8u))) & 0xFu;
    let hi = (wbyte(b, 104u + i % 4u) >> (2u * (i / 4u))) & 3u;
    return vec2<f32>(wf16(b, 108u) * f32(i32(lo | (hi << 4u)) - 32), 0.0);
}

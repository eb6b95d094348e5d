// q3_K weights: GGUF's 110-byte super-blocks of 256, each padded to 112
// bytes at upload (PadBlocks): 32 bytes of high-bit mask, 64 bytes of bit
// pairs, 12 bytes of packed 6-bit scales, f16 d. Element p of a block:
// pair (p%128)/32 of byte 32 + 32·(p/128) + p%32, mask bit p/32 of byte
// p%32 (clear: minus 4); scale p/16. x = d·(sc−32)·q. A CHUNK is 16
// elements, one scale's.
const BLK: u32 = 256u;
const PADV: u32 = 7u;
const CHUNK: u32 = 16u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    let q = (wbyte(b, 32u + 32u * (p / 128u) + p % 32u) >> (2u * ((p % 128u) / 32u))) & 3u;
    let h = (wbyte(b, p % 32u) >> (p / 32u)) & 1u;
    return f32(q) - select(4.0, 0.0, h == 1u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let i = (e % 256u) / 16u;
    let lo = (wbyte(b, 96u + i % 8u) >> (4u * (i / 8u))) & 0xFu;
    let hi = (wbyte(b, 104u + i % 4u) >> (2u * (i / 4u))) & 3u;
    return vec2<f32>(wf16(b, 108u) * f32(i32(lo | (hi << 4u)) - 32), 0.0);
}

// iq4_xs weights: GGUF's 136-byte super-blocks of 256, each padded to 144
// bytes at upload (PadBlocks): half-precision d, 16 bits of scale high pairs, 4 bytes
// of scale nibbles, 128 bytes of code-book nibbles (sub-block s: bytes
// 8+16s.., element l < 16 the low nibble, l + 16 the high). x =
// d·(ls−32)·iq4nl[q] per sub-block of 32. A CHUNK is one sub-block.
const BLK: u32 = 256u;
const PADV: u32 = 9u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let s = (e % 256u) / 32u;
    let l = e % 32u;
    return iq4nl[(wbyte(e / 256u, 8u + 16u * s + l % 16u) >> (4u * (l / 16u))) & 0xFu];
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let s = (e % 256u) / 32u;
    let lo = (wbyte(b, 4u + s / 2u) >> (4u * (s % 2u))) & 0xFu;
    let hi = ((wbyte(b, 2u) | (wbyte(b, 3u) << 8u)) >> (2u * s)) & 3u;
    return vec2<f32>(wf16(b, 0u) * f32(i32(lo | (hi << 4u)) - 32), 0.0);
}

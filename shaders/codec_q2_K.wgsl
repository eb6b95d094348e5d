// q2_K weights: GGUF's 84-byte super-blocks of 256, each padded to 96
// bytes at upload (PadBlocks): 16 bytes of 4-bit scale and min pairs, 64
// bytes of bit pairs, f16 d, f16 dmin. Element p of a block: pair
// (p%128)/32 of byte 16 + 32·(p/128) + p%32; scale byte p/16. x =
// d·sc·q − dmin·m (AFFINE). A CHUNK is 16 elements, one scale's.
const BLK: u32 = 256u;
const PADV: u32 = 6u;
const CHUNK: u32 = 16u;
const AFFINE: bool = true;

fn qv(e: u32, soff: u32) -> f32 {
    let p = e % 256u;
    return f32((wbyte(e / 256u, 16u + 32u * (p / 128u) + p % 32u) >> (2u * ((p % 128u) / 32u))) & 3u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let sc = wbyte(b, (e % 256u) / 16u);
    return vec2<f32>(wf16(b, 80u) * f32(sc & 0xFu), wf16(b, 82u) * f32(sc >> 4u));
}

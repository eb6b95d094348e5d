// q5_1 weights: GGUF's 24-byte blocks of 32, each padded to 32 bytes at
// upload (PadBlocks): half-precision d and m, 32 fifth bits, 16 bytes of nibbles.
// x = d·q + m, so the chunk scales are (d, −m) (AFFINE). A CHUNK is one
// block.
const BLK: u32 = 32u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 32u;
    let j = e % 32u;
    let lo = (wbyte(b, 8u + j % 16u) >> (4u * (j / 16u))) & 0xFu;
    let hi = (wbyte(b, 4u + j / 8u) >> (j % 8u)) & 1u;
    return f32(lo | (hi << 4u));
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 32u;
    return vec2<f32>(wf16(b, 0u), -wf16(b, 2u));
}

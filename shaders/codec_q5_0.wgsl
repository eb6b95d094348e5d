// q5_0 weights: GGUF's 22-byte blocks of 32, each padded to 32 bytes at
// upload (PadBlocks): half-precision d, 32 fifth bits (bit j for element j), 16 bytes
// of nibbles (element j < 16 the low nibble of byte j, j + 16 its high
// nibble). x = d·(q − 16) exactly as GGUF (and the CPU engine) decode it.
// A CHUNK is one block.
const BLK: u32 = 32u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 32u;
    let j = e % 32u;
    let lo = (wbyte(b, 6u + j % 16u) >> (4u * (j / 16u))) & 0xFu;
    let hi = (wbyte(b, 2u + j / 8u) >> (j % 8u)) & 1u;
    return f32(lo | (hi << 4u)) - 16.0;
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(wf16(e / 32u, 0u), 0.0);
}

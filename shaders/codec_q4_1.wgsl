// q4_1 weights: GGUF's 20-byte blocks of 32, each padded to 32 bytes at
// upload (PadBlocks): half-precision d and m, 16 bytes of nibbles (element j < 16 the
// low nibble of byte j, j + 16 its high nibble). x = d·q + m, so the chunk
// scales are (d, −m) (AFFINE). A CHUNK is one block.
const BLK: u32 = 32u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 32u;
    return f32((wbyte(e / 32u, 4u + j % 16u) >> (4u * (j / 16u))) & 0xFu);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 32u;
    return vec2<f32>(wf16(b, 0u), -wf16(b, 2u));
}

// iq4_nl weights: GGUF's 18-byte blocks of 32, each padded to 32 bytes at
// upload (PadBlocks): half-precision d, 16 bytes of nibbles indexing the non-linear
// code book iq4nl. x = d·iq4nl[q]. A CHUNK is one block.
const BLK: u32 = 32u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 32u;
    return iq4nl[(wbyte(e / 32u, 2u + j % 16u) >> (4u * (j / 16u))) & 0xFu];
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(wf16(e / 32u, 0u), 0.0);
}

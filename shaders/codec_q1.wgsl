// q1 weights (tensor/seed.go): 6-byte tiles of 32, each padded to 16 bytes
// at upload (PadBlocks): 32 sign bits (element j: bit j%8 of byte j/8),
// then f16 d at byte 4. x = 2d·s − d (AFFINE). A CHUNK is one tile.
const BLK: u32 = 32u;
const PADV: u32 = 1u;
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 32u;
    return f32((wbyte(e / 32u, j / 8u) >> (j % 8u)) & 1u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let d = wf16(e / 32u, 4u);
    return vec2<f32>(2.0 * d, d);
}

// q1g weights (tensor/seed.go): 18-byte groups of 128, each padded to 32
// bytes at upload (PadBlocks): the sign plane (element j: bit j%8 of byte
// j/8), then f16 d at byte 16, one scale per 128. x = 2d·s − d (AFFINE).
// A CHUNK is a quarter group.
const BLK: u32 = 128u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 128u;
    return f32((wbyte(e / 128u, j / 8u) >> (j % 8u)) & 1u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let d = wf16(e / 128u, 16u);
    return vec2<f32>(2.0 * d, d);
}

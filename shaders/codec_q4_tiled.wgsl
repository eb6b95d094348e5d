// q4_tiled weights (tensor/seed.go): 18-byte tiles of 32, each padded to
// 32 bytes at upload (PadBlocks): the half-precision d, then 16 bytes of nibbles in
// element order (element j: byte 2 + j/2, the low nibble when j is even).
// x = d·(q−8). A CHUNK is one tile.
const BLK: u32 = 32u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 32u;
    return f32(i32((wbyte(e / 32u, 2u + j / 2u) >> (4u * (j & 1u))) & 0xFu) - 8);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(wf16(e / 32u, 0u), 0.0);
}

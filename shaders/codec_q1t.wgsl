// q1t weights (tensor/seed.go): 28-byte blocks of 64, each padded to 32
// bytes at upload (PadBlocks): 16 bytes of 2-bit ternary codes t (element
// j: bits 2(j%4) of byte j/4, value t−1), f16 d at byte 16, four overlay
// entries at byte 18 (u8 index, int8 code). x = d·v, v the code of the
// first entry whose index is j, else t−1. A CHUNK is half a block.
const BLK: u32 = 64u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 64u;
    let j = e % 64u;
    for (var k = 0u; k < 4u; k++) {
        if (wbyte(b, 18u + 2u * k) == j) {
            return f32(bitcast<i32>(wbyte(b, 19u + 2u * k) << 24u) >> 24u);
        }
    }
    return f32(i32((wbyte(b, j / 4u) >> (2u * (j % 4u))) & 3u) - 1);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(wf16(e / 64u, 16u), 0.0);
}

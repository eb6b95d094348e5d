// q4tp weights (tensor/seed.go): 36-byte blocks of 64, each padded to 48
// bytes at upload (PadBlocks): two 16-byte nibble strides (element i of
// sub-block k: byte 16k + i%16, the low nibble when i < 16), f16 d at byte
// 32, the sub-blocks' ladder rungs at byte 34. x = (d·2^(−r/4))·(q−8); the
// ladder is exact f32 bit patterns, the same values as the CPU's. A CHUNK
// is one sub-block.
const BLK: u32 = 64u;
const PADV: u32 = 3u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

var<private> ladder4: array<u32, 16> = array<u32, 16>(0x3F800000u, 0x3F5744FDu, 0x3F3504F3u, 0x3F1837F0u,
    0x3F000000u, 0x3ED744FDu, 0x3EB504F3u, 0x3E9837F0u, 0x3E800000u, 0x3E5744FDu, 0x3E3504F3u, 0x3E1837F0u,
    0x3E000000u, 0x3DD744FDu, 0x3DB504F3u, 0x3D9837F0u);

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 64u;
    let i = j % 32u;
    return f32(i32((wbyte(e / 64u, 16u * (j / 32u) + i % 16u) >> (4u * (i / 16u))) & 0xFu) - 8);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 64u;
    let r = (wbyte(b, 34u) >> (4u * ((e % 64u) / 32u))) & 0xFu;
    return vec2<f32>(wf16(b, 32u) * bitcast<f32>(ladder4[r]), 0.0);
}

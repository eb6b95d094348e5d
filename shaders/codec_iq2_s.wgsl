// iq2_s weights: GGUF's 82-byte super-blocks of 256, each padded to 96
// bytes at upload (PadBlocks), the iq2s code book (1024 entries of 8 bytes)
// appended at word soff (GridTail). Group g of 8 elements: index low byte
// 2 + g, high bit pair (2(g%4)) of byte 66 + g/4, sign byte 34 + g; scales
// as iq2_xs from byte 74. x = d·(0.5+scale)·0.25·grid·sign. A CHUNK is 16
// elements, one scale's.
const BLK: u32 = 256u;
const PADV: u32 = 6u;
const CHUNK: u32 = 16u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    let g = p / 8u;
    let idx = wbyte(b, 2u + g) | (((wbyte(b, 66u + g / 4u) >> (2u * (g % 4u))) & 3u) << 8u);
    let v = f32(gbyte(soff, 8u, idx, p % 8u));
    return select(v, -v, ((wbyte(b, 34u + g) >> (p % 8u)) & 1u) == 1u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let p = e % 256u;
    let s = (wbyte(b, 74u + p / 32u) >> (4u * ((p % 32u) / 16u))) & 0xFu;
    return vec2<f32>(wf16(b, 0u) * (0.5 + f32(s)) * 0.25, 0.0);
}

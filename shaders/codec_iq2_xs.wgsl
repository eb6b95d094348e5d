// iq2_xs weights: GGUF's 74-byte super-blocks of 256, each padded to 80
// bytes at upload (PadBlocks), the iq2xs code book (512 entries of 8 bytes)
// appended at word soff (GridTail). Group g of 8 elements: the u16 at
// 2 + 2g (9-bit grid index, 7-bit sign index); sub-block s's two 4-bit
// scales in byte 66 + s (one per 16). x = d·(0.5+scale)·0.25·grid·sign. A
// CHUNK is 16 elements, one scale's.
const BLK: u32 = 256u;
const PADV: u32 = 5u;
const CHUNK: u32 = 16u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    let v = wbyte(b, 2u + 2u * (p / 8u)) | (wbyte(b, 3u + 2u * (p / 8u)) << 8u);
    let g = f32(gbyte(soff, 8u, v & 511u, p % 8u));
    return select(g, -g, ksign(v >> 9u, p % 8u));
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let p = e % 256u;
    let s = (wbyte(b, 66u + p / 32u) >> (4u * ((p % 32u) / 16u))) & 0xFu;
    return vec2<f32>(wf16(b, 0u) * (0.5 + f32(s)) * 0.25, 0.0);
}

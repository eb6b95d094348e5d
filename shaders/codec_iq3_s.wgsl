// iq3_s weights: GGUF's 110-byte super-blocks of 256, each padded to 112
// bytes at upload (PadBlocks), the iq3s code book (512 entries of 4 bytes)
// appended at word soff (GridTail). Element p: grid index byte 2 + p/4
// with its ninth bit (p/4)%8 of byte 66 + p/32, sign bit p%8 of byte
// 74 + p/8; sub-block s's 4-bit scale in byte 106 + s/2. x =
// d·(1+2·scale)·grid·sign. A CHUNK is one sub-block.
const BLK: u32 = 256u;
const PADV: u32 = 7u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    let k = p / 4u;
    let idx = wbyte(b, 2u + k) | (((wbyte(b, 66u + k / 8u) >> (k % 8u)) & 1u) << 8u);
    let g = f32(gbyte(soff, 4u, idx, p % 4u));
    return select(g, -g, ((wbyte(b, 74u + p / 8u) >> (p % 8u)) & 1u) == 1u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let s = (e % 256u) / 32u;
    let sc = (wbyte(b, 106u + s / 2u) >> (4u * (s % 2u))) & 0xFu;
    return vec2<f32>(wf16(b, 0u) * f32(1u + 2u * sc), 0.0);
}

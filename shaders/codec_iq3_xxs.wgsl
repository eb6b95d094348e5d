// iq3_xxs weights: GGUF's 98-byte super-blocks of 256, each padded to 112
// bytes at upload (PadBlocks), the iq3xxs code book (256 entries of 4
// bytes) appended at word soff (GridTail). Element p: grid index byte
// 2 + p/4; sub-block s's u32 at 66 + 4s holds four 7-bit sign indices and
// the 4-bit scale. x = d·(0.5+scale)·0.5·grid·sign. A CHUNK is one
// sub-block.
const BLK: u32 = 256u;
const PADV: u32 = 7u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    let g = f32(gbyte(soff, 4u, wbyte(b, 2u + p / 4u), p % 4u));
    let aux = wword(b, 66u + 4u * (p / 32u));
    return select(g, -g, ksign((aux >> (7u * ((p % 32u) / 8u))) & 127u, p % 8u));
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let aux = wword(b, 66u + 4u * ((e % 256u) / 32u));
    return vec2<f32>(wf16(b, 0u) * (0.5 + f32(aux >> 28u)) * 0.5, 0.0);
}

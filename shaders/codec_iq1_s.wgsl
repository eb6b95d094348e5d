// iq1_s weights: GGUF's 50-byte super-blocks of 256, each padded to 64
// bytes at upload (PadBlocks), the iq1s code book (2048 entries of 8 int8
// in -1..1) appended at word soff (GridTail). Sub-block s's u16 at 34 + 2s
// holds four 3-bit index high parts, a 3-bit scale and the delta's sign;
// group g's index low byte is 2 + g. x = d·(2·scale+1)·(grid ± 0.125). A
// CHUNK is one sub-block.
const BLK: u32 = 256u;
const PADV: u32 = 4u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    let s = p / 32u;
    let l = (p % 32u) / 8u;
    let qh = wbyte(b, 34u + 2u * s) | (wbyte(b, 35u + 2u * s) << 8u);
    let idx = wbyte(b, 2u + 4u * s + l) | (((qh >> (3u * l)) & 7u) << 8u);
    let g = f32(bitcast<i32>(gbyte(soff, 8u, idx, p % 8u) << 24u) >> 24u);
    return g + select(0.125, -0.125, (qh & 0x8000u) != 0u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let s = (e % 256u) / 32u;
    let qh = wbyte(b, 34u + 2u * s) | (wbyte(b, 35u + 2u * s) << 8u);
    return vec2<f32>(wf16(b, 0u) * f32(2u * ((qh >> 12u) & 7u) + 1u), 0.0);
}

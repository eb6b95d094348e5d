// iq1_m weights: GGUF's 56-byte super-blocks of 256, each padded to 64
// bytes at upload (PadBlocks), the iq1s code book appended at word soff
// (GridTail). Group g of 8: index low byte g, nibble g%2 of byte 32 + g/2
// (3-bit index high part, delta sign); the four u16 at 48.. hold 3-bit
// scales (one per 16) and, in their top nibbles, the half-precision d. x =
// d·(2·scale+1)·(grid ± 0.125). A CHUNK is 16 elements, one scale's.
const BLK: u32 = 256u;
const PADV: u32 = 4u;
const CHUNK: u32 = 16u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let g = (e % 256u) / 8u;
    let h = (wbyte(b, 32u + g / 2u) >> (4u * (g % 2u))) & 0xFu;
    let idx = wbyte(b, g) | ((h & 7u) << 8u);
    let v = f32(bitcast<i32>(gbyte(soff, 8u, idx, e % 8u) << 24u) >> 24u);
    return v + select(0.125, -0.125, (h & 8u) != 0u);
}

fn iq1msc(b: u32, k: u32) -> u32 {
    return wbyte(b, 48u + 2u * k) | (wbyte(b, 49u + 2u * k) << 8u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let i = (e % 256u) / 16u;
    let d = unpack2x16float((iq1msc(b, 0u) >> 12u) | ((iq1msc(b, 1u) >> 8u) & 0xF0u) |
        ((iq1msc(b, 2u) >> 4u) & 0xF00u) | (iq1msc(b, 3u) & 0xF000u)).x;
    let ib = i / 2u;
    let s = (iq1msc(b, ib / 2u) >> (6u * (ib % 2u) + 3u * (i % 2u))) & 7u;
    return vec2<f32>(d * f32(2u * s + 1u), 0.0);
}

// tq2_0 weights: GGUF's 66-byte super-blocks of 256, each padded to 80
// bytes at upload (PadBlocks): 64 bytes of 2-bit codes (element p: pair
// (p%128)/32 of byte 32·(p/128) + p%32), f16 d. x = (q−1)·d. A CHUNK is 32
// elements.
const BLK: u32 = 256u;
const PADV: u32 = 5u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let p = e % 256u;
    return f32((wbyte(e / 256u, 32u * (p / 128u) + p % 32u) >> (2u * ((p % 128u) / 32u))) & 3u) - 1.0;
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(wf16(e / 256u, 64u), 0.0);
}

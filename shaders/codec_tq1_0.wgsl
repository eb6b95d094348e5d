// tq1_0 weights: GGUF's 54-byte super-blocks of 256, each padded to 64
// bytes at upload (PadBlocks): 48 bytes of five base-3 digits, 4 bytes of
// four, f16 d. Digit n of byte v is ((v·3^n mod 256)·3) >> 8, as ggml
// decodes it; elements 0..159 are digit p/32 of byte p%32, 160..239 digit
// (p−160)/16 of byte 32 + p%16, 240..255 digit (p−240)/4 of byte 48 + p%4.
// x = (digit−1)·d. A CHUNK is 32 elements.
const BLK: u32 = 256u;
const PADV: u32 = 4u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    var v: u32;
    var n: u32;
    if (p < 160u) {
        v = wbyte(b, p % 32u);
        n = p / 32u;
    } else if (p < 240u) {
        v = wbyte(b, 32u + (p - 160u) % 16u);
        n = (p - 160u) / 16u;
    } else {
        v = wbyte(b, 48u + (p - 240u) % 4u);
        n = (p - 240u) / 4u;
    }
    var pw = 1u;
    for (var i = 0u; i < n; i++) {
        pw *= 3u;
    }
    return f32((((v * pw) & 0xFFu) * 3u) >> 8u) - 1.0;
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(wf16(e / 256u, 52u), 0.0);
}

// q5_K weights: GGUF's 176-byte super-blocks of 256 (eleven vec4<u32>, no
// padding): half-precision d and dmin, q4_K's 12 bytes of 6-bit scales and mins, 32
// bytes of fifth bits (bit s of byte l for element l of sub-block s), 128
// bytes of nibbles (sub-blocks 2p and 2p+1 the low and high nibbles of
// bytes 48+32p..). x = d·sc·q − dmin·m per sub-block of 32 (AFFINE). A
// CHUNK is one sub-block.
const BLK: u32 = 256u;
const PADV: u32 = 11u;
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let s = (e % 256u) / 32u;
    let l = e % 32u;
    let lo = (wbyte(b, 48u + 32u * (s / 2u) + l) >> (4u * (s % 2u))) & 0xFu;
    let hi = (wbyte(b, 16u + l) >> s) & 1u;
    return f32(lo | (hi << 4u));
}

// k4scale is GGUF's get_scale_min_k4: sub-block j's 6-bit scale and min.
fn k4scale(b: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(wbyte(b, 4u + j) & 63u, wbyte(b, 8u + j) & 63u);
    }
    return vec2<u32>((wbyte(b, 8u + j) & 0xFu) | ((wbyte(b, j) >> 6u) << 4u),
        (wbyte(b, 8u + j) >> 4u) | ((wbyte(b, 4u + j) >> 6u) << 4u));
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let sm = k4scale(b, (e % 256u) / 32u);
    return vec2<f32>(wf16(b, 0u) * f32(sm.x), wf16(b, 2u) * f32(sm.y));
}

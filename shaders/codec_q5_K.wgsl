// q5_K weights: GGUF's 176-byte super-blocks of 256 (eleven vec4<u32>, no
// padding): half-precision d and dmin, q4_K's 12 bytes of 6-bit scales and mins, 32
// bytes of fifth bits (bit s of byte l for element l of sub-block s), 128
// bytes of nibbles (sub-blocks 2p and 2p+1 the low and high nibbles of
// bytes 48+32p..). x = d·sc·q − dmin·m per sub-block of 32 (AFFINE). A
// CHUNK is one sub-block, read a word (four elements) at a time.
const BLK: u32 = 256u;
const PADV: u32 = 11u;
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

// q5k4 is four raw values of sub-block s: a word of nibble bytes n (the
// sub-block's nibble is s%2) and a word of fifth-bit bytes h (bit s), by
// the float trick of codec_q4_0.wgsl.
fn q5k4(n: u32, h: u32, s: u32) -> vec4<f32> {
    let v = ((n >> (4u * (s % 2u))) & 0x0F0F0F0Fu) | (((h >> s) & 0x01010101u) << 4u);
    let u = vec4<u32>(v & 0xFFu, (v >> 8u) & 0xFFu, (v >> 16u) & 0xFFu, v >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388608.0);
}

// fetchq is sub-block s's 32 raw values: its nibbles are the two vec4 from
// byte 48 + 32·(s/2), its fifth bits the two from byte 16.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = 11u * (e / 256u);
    let s = (e % 256u) / 32u;
    let q0 = w[b + 3u + 2u * (s / 2u)];
    let q1 = w[b + 4u + 2u * (s / 2u)];
    let h0 = w[b + 1u];
    let h1 = w[b + 2u];
    return array<vec4<f32>, 8>(
        q5k4(q0.x, h0.x, s), q5k4(q0.y, h0.y, s), q5k4(q0.z, h0.z, s), q5k4(q0.w, h0.w, s),
        q5k4(q1.x, h1.x, s), q5k4(q1.y, h1.y, s), q5k4(q1.z, h1.z, s), q5k4(q1.w, h1.w, s));
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let b = 11u * (e / 256u);
    let s = (e % 256u) / 32u;
    let l = e % 32u;
    let n = w[b + 3u + 2u * (s / 2u) + l / 16u][(l % 16u) / 4u];
    let h = w[b + 1u + l / 16u][(l % 16u) / 4u];
    let sm = chunkscales(e, soff);
    return q5k4(n, h, s) * sm.x - vec4<f32>(sm.y);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let sm = chunkscales(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 8u; i++) {
        r[i] = r[i] * sm.x - vec4<f32>(sm.y);
    }
    return r;
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return chunkscales(e, soff).x;
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

// q6_K weights: GGUF's 210-byte super-blocks of 256, each padded to 224
// bytes (fourteen vec4<u32>) at upload (see PadQ6_K) so a block starts on a
// 16-byte boundary; the bytes keep GGUF's offsets: 128 bytes of low
// nibbles ql, 64 of high bit pairs qh, 16 int8 scales (one per 16
// elements), the half-precision d. x = (d·scale)·(q - 32) for the 6-bit q,
// exactly as GGUF (and the CPU engine) decode it. A CHUNK is 16 elements,
// one scale's: one 16-byte load of ql and one of qh (each byte gives one
// element; its other bits belong to another chunk).
const CHUNK: u32 = 16u;

// sbyte is int8 scale i (0..15) of a block's scale vec4.
fn sbyte(s: vec4<u32>, i: u32) -> f32 {
    let u = (s[i / 4u] >> (8u * (i % 4u))) & 0xFFu;
    return f32(bitcast<i32>(u << 24u) >> 24u);
}

// q6x4 decodes four elements: nibbles of ql word a from bit ns, bit pairs
// of qh word h from bit hs, times the scale (the float trick of
// codec_q4_0.wgsl, with the -32 folded into the subtraction).
fn q6x4(a: u32, h: u32, ns: u32, hs: u32, s: f32) -> vec4<f32> {
    let v = ((a >> ns) & 0x0F0F0F0Fu) | (((h >> hs) & 0x03030303u) << 4u);
    let u = vec4<u32>(v & 0xFFu, (v >> 8u) & 0xFFu, (v >> 16u) & 0xFFu, v >> 24u) | vec4<u32>(0x4B000000u);
    return (bitcast<vec4<f32>>(u) - vec4<f32>(8388640.0)) * s;
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let b = 14u * (e / 256u);
    let c = (e % 256u) / 32u;
    let n = c / 4u;
    let k = c % 4u;
    let l = e % 32u;
    let a = w[b + 4u * n + 2u * (k % 2u) + l / 16u][(l % 16u) / 4u];
    let h = w[b + 8u + 2u * n + l / 16u][(l % 16u) / 4u];
    let d = unpack2x16float(w[b + 13u].x).x;
    return q6x4(a, h, (k / 2u) * 4u, 2u * k, d * sbyte(w[b + 12u], 8u * n + 2u * k + l / 16u));
}

// q6raw is q6x4 without the scale: the 6-bit values minus 32.
fn q6raw(a: u32, h: u32, ns: u32, hs: u32) -> vec4<f32> {
    let v = ((a >> ns) & 0x0F0F0F0Fu) | (((h >> hs) & 0x03030303u) << 4u);
    let u = vec4<u32>(v & 0xFFu, (v >> 8u) & 0xFFu, (v >> 16u) & 0xFFu, v >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388640.0);
}

// fetchq is a chunk's 16 values without their scale (chunkscale): the
// kernels apply the scale once to the chunk's sum.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let b = 14u * (e / 256u);
    let c = (e % 256u) / 32u;
    let n = c / 4u;
    let k = c % 4u;
    let half = (e % 32u) / 16u;
    let qa = w[b + 4u * n + 2u * (k % 2u) + half];
    let ha = w[b + 8u + 2u * n + half];
    let ns = (k / 2u) * 4u;
    let hs = 2u * k;
    return array<vec4<f32>, 4>(q6raw(qa.x, ha.x, ns, hs), q6raw(qa.y, ha.y, ns, hs), q6raw(qa.z, ha.z, ns, hs), q6raw(qa.w, ha.w, ns, hs));
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    let b = 14u * (e / 256u);
    let c = (e % 256u) / 32u;
    let d = unpack2x16float(w[b + 13u].x).x;
    return d * sbyte(w[b + 12u], 8u * (c / 4u) + 2u * (c % 4u) + (e % 32u) / 16u);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let q = fetchq(e, soff);
    let s = chunkscale(e, soff);
    return array<vec4<f32>, 4>(q[0] * s, q[1] * s, q[2] * s, q[3] * s);
}

// chunkscales is (chunkscale, 0): this codec's values are its quants times
// the chunk scale, with no offset (AFFINE is false).
const AFFINE: bool = false;

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

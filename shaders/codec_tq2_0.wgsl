// tq2_0 weights, repacked at upload into two planes: the quant plane
// holds a 256-element super-block's codes in 64 bytes, u32 word i of the
// plane elements 16i..16i+15 (element 16i+4m+k in bits 2m..2m+1 of byte k:
// a shift and a mask give four consecutive elements, one per byte), the
// scale plane (from u32 `soff`) the f16 d two per u32. x = (q−1)·d. A CHUNK
// is 32 elements, two u32 of one vec4<u32>.
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

// t2x4 is four values q−1 from the bytes of n (each 0..3), by the float
// trick of codec_q4_0.wgsl.
fn t2x4(n: u32) -> vec4<f32> {
    let u = vec4<u32>(n & 0xFFu, (n >> 8u) & 0xFFu, (n >> 16u) & 0xFFu, n >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388609.0);
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let v = w[e / 64u];
    let k = (e / 16u) % 4u; // 0 or 2
    let a = v[k];
    let b = v[k + 1u];
    let m = 0x03030303u;
    return array<vec4<f32>, 8>(t2x4(a & m), t2x4((a >> 2u) & m), t2x4((a >> 4u) & m), t2x4((a >> 6u) & m),
        t2x4(b & m), t2x4((b >> 2u) & m), t2x4((b >> 4u) & m), t2x4((b >> 6u) & m));
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let i = soff + b / 2u;
    let d2 = unpack2x16float(w[i / 4u][i % 4u]);
    return select(d2.x, d2.y, (b & 1u) == 1u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let v = w[e / 64u][(e / 16u) % 4u] >> (2u * ((e % 16u) / 4u));
    return t2x4(v & 0x03030303u) * chunkscale(e, soff);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let s = chunkscale(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 8u; i++) {
        r[i] = r[i] * s;
    }
    return r;
}

// iq4_xs weights, repacked at upload into two planes: the quant plane holds
// each 256-element super-block's 128 code-book nibble bytes (one vec4<u32>
// per 32-element sub-block, element l < 16 the low nibble of byte l, l + 16
// its high, as iq4_nl), the scale plane (from u32 `soff`) two u32 per
// super-block: GGUF's first 8 bytes (f16 d, 16 bits of the sub-block scales'
// high pairs, then their low nibbles). x = d·(ls−32)·kvals[q] per
// sub-block. lut(i) reads the code book (codecs.go adds it: workgroup memory
// where the kernel calls codec_init). A CHUNK is one sub-block.
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

// kvals is IQ4_NL's non-linear code book, which IQ4_XS shares.
var<private> kvals: array<f32, 16> = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
    1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// lut4 looks up the low nibbles of v's four bytes in the code book.
fn lut4(v: u32) -> vec4<f32> {
    return vec4<f32>(lut(v & 0xFu), lut((v >> 8u) & 0xFu), lut((v >> 16u) & 0xFu), lut((v >> 24u) & 0xFu));
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let q = w[e / 32u];
    return array<vec4<f32>, 8>(lut4(q.x), lut4(q.y), lut4(q.z), lut4(q.w),
        lut4(q.x >> 4u), lut4(q.y >> 4u), lut4(q.z >> 4u), lut4(q.w >> 4u));
}

// chunkscale is d·(ls−32) of e's sub-block s: ls is the low nibble s of
// the second scale word with bits 2s..2s+1 of the first word's high half
// on top.
fn chunkscale(e: u32, soff: u32) -> f32 {
    let i = soff + 2u * (e / 256u); // even: both words in one vec4
    let v = w[i / 4u];
    let h = v[i % 4u];
    let l = v[i % 4u + 1u];
    let s = (e % 256u) / 32u;
    let ls = ((l >> (4u * s)) & 0xFu) | (((h >> (16u + 2u * s)) & 3u) << 4u);
    return unpack2x16float(h).x * f32(i32(ls) - 32);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let j = e % 32u;
    let v = w[e / 32u][(j % 16u) / 4u] >> select(0u, 4u, j >= 16u);
    return lut4(v) * chunkscale(e, soff);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let s = chunkscale(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 8u; i++) {
        r[i] = r[i] * s;
    }
    return r;
}

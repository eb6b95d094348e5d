// mxfp4 weights, repacked at upload like q4_0: the quant plane holds each
// 32-element block's 16 e2m1 nibble bytes (one vec4<u32>; element j < 16
// the low nibble of byte j, j + 16 its high nibble), the scale plane (from
// u32 `soff`) the e8m0 exponents, four per u32. x =
// kvals[q]·2^(e−128) (ggml's doubled code book and halved scale). lut(i)
// reads the code book (codecs.go adds it: workgroup memory where the kernel
// calls codec_init). One vec4<u32> is a whole block and one CHUNK.
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

// kvals is MXFP4's e2m1 code book, doubled (ggml's kvalues_mxfp4).
var<private> kvals: array<f32, 16> = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0,
    0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

// lut4 looks up the low nibbles of v's four bytes in the code book.
fn lut4(v: u32) -> vec4<f32> {
    return vec4<f32>(lut(v & 0xFu), lut((v >> 8u) & 0xFu), lut((v >> 16u) & 0xFu), lut((v >> 24u) & 0xFu));
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let q = w[e / 32u];
    return array<vec4<f32>, 8>(lut4(q.x), lut4(q.y), lut4(q.z), lut4(q.w),
        lut4(q.x >> 4u), lut4(q.y >> 4u), lut4(q.z >> 4u), lut4(q.w >> 4u));
}

// chunkscale is ggml_e8m0_to_fp32_half of the block's exponent.
fn chunkscale(e: u32, soff: u32) -> f32 {
    let b = e / 32u;
    let i = soff + b / 4u;
    let x = (w[i / 4u][i % 4u] >> (8u * (b % 4u))) & 0xFFu;
    return bitcast<f32>(select((x - 1u) << 23u, 0x00200000u << x, x < 2u));
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

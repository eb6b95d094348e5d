// iq4_nl weights, repacked at upload like q4_0 (GGUF's 18-byte blocks are
// q4_0's shape: an f16 d, 16 nibble bytes): the quant plane holds each
// block's 16 nibble bytes (one vec4<u32> per block), the scale plane (from
// u32 `soff`) the f16 d two per u32. Within a block, element j < 16 is the
// low nibble of byte j and element j+16 its high nibble; x = d·kvals[q],
// exactly as GGUF (and the CPU engine) decode it. lut(i) reads the code
// book (codecs.go adds it: workgroup memory where the kernel calls
// codec_init). One vec4<u32> is a whole 32-element block and one CHUNK.
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

// kvals is IQ4_NL's (and IQ4_XS's) non-linear code book.
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

fn chunkscale(e: u32, soff: u32) -> f32 {
    let b = e / 32u;
    let i = soff + b / 2u;
    let d2 = unpack2x16float(w[i / 4u][i % 4u]);
    return select(d2.x, d2.y, (b & 1u) == 1u);
}

// chunkscales is (d, 0).
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

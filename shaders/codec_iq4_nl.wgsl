// iq4_nl weights: GGUF's 18-byte blocks of 32, each laid out in 32 bytes
// at upload (PadBlocks): the 16 nibble bytes first (element j < 16 the low
// nibble of byte j, j + 16 its high nibble), then the half-precision d.
// x = d·iq4nl[q], exactly as GGUF (and the CPU engine) decode it. One block
// is two vec4<u32> and one CHUNK, read a word (four elements) at a time.
const BLK: u32 = 32u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

// lut4 looks up the low nibbles of v's four bytes in the code book.
fn lut4(v: u32) -> vec4<f32> {
    return vec4<f32>(iq4nl[v & 0xFu], iq4nl[(v >> 8u) & 0xFu], iq4nl[(v >> 16u) & 0xFu], iq4nl[(v >> 24u) & 0xFu]);
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let q = w[2u * (e / 32u)];
    return array<vec4<f32>, 8>(lut4(q.x), lut4(q.y), lut4(q.z), lut4(q.w),
        lut4(q.x >> 4u), lut4(q.y >> 4u), lut4(q.z >> 4u), lut4(q.w >> 4u));
}

// chunkscales is (d, 0).
fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let x = w[2u * (e / 32u) + 1u].x;
    return vec2<f32>(unpack2x16float(x).x, 0.0);
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return chunkscales(e, soff).x;
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let j = e % 32u;
    let v = w[2u * (e / 32u)][(j % 16u) / 4u] >> select(0u, 4u, j >= 16u);
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

// q4_K weights, GGUF's 144-byte super-blocks unchanged (nine vec4<u32>;
// blocks never straddle a row, rows are whole super-blocks). Each holds the
// half-precision d and dmin, 12 bytes of 6-bit sub-block scales and mins, then 128 bytes of
// nibbles, 32 bytes per pair of sub-blocks (low nibbles the first, high
// the second). Element x = d·sc·q - dmin·m for sub-block scale sc and min
// m, exactly as GGUF (and the CPU engine) decode it. A CHUNK is one
// sub-block: 32 elements from two 16-byte loads and the block header.
const CHUNK: u32 = 32u;

// kbyte is byte k of the 12 scale bytes (header words 1..3).
fn kbyte(hdr: vec4<u32>, k: u32) -> u32 {
    return (hdr[1u + k / 4u] >> (8u * (k % 4u))) & 0xFFu;
}

// q4kscale is (d·sc, dmin·m) of sub-block j of super-block b, GGUF's
// get_scale_min_k4.
fn q4kscale(b: u32, j: u32) -> vec2<f32> {
    let hdr = w[9u * b];
    let dm = unpack2x16float(hdr.x);
    var sc: u32;
    var mn: u32;
    if (j < 4u) {
        sc = kbyte(hdr, j) & 63u;
        mn = kbyte(hdr, j + 4u) & 63u;
    } else {
        sc = (kbyte(hdr, j + 4u) & 0xFu) | ((kbyte(hdr, j - 4u) >> 6u) << 4u);
        mn = (kbyte(hdr, j + 4u) >> 4u) | ((kbyte(hdr, j) >> 6u) << 4u);
    }
    return vec2<f32>(dm.x * f32(sc), dm.y * f32(mn));
}

// q4k4 decodes four nibbles (one per byte of n) with the sub-block's
// (d·sc, dmin·m); the float trick of codec_q4_0.wgsl turns a byte into
// its value without an int-to-float conversion.
fn q4k4(n: u32, s: vec2<f32>) -> vec4<f32> {
    let u = vec4<u32>(n & 0xFFu, (n >> 8u) & 0xFFu, (n >> 16u) & 0xFFu, n >> 24u) | vec4<u32>(0x4B000000u);
    let q = bitcast<vec4<f32>>(u) - vec4<f32>(8388608.0);
    return q * s.x - vec4<f32>(s.y);
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let b = e / 256u;
    let j = (e % 256u) / 32u;
    let l = e % 32u;
    let v = w[9u * b + 1u + 2u * (j / 2u) + l / 16u][(l % 16u) / 4u];
    return q4k4((v >> ((j % 2u) * 4u)) & 0x0F0F0F0Fu, q4kscale(b, j));
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = e / 256u;
    let j = (e % 256u) / 32u;
    let s = q4kscale(b, j);
    let base = 9u * b + 1u + 2u * (j / 2u);
    let sh = (j % 2u) * 4u;
    let qa = w[base];
    let qb = w[base + 1u];
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q4k4((qa.x >> sh) & m, s), q4k4((qa.y >> sh) & m, s), q4k4((qa.z >> sh) & m, s), q4k4((qa.w >> sh) & m, s),
        q4k4((qb.x >> sh) & m, s), q4k4((qb.y >> sh) & m, s), q4k4((qb.z >> sh) & m, s), q4k4((qb.w >> sh) & m, s));
}

// fetchq and chunkscales split fetchc: a sub-block's values are
// affine in its quants, x = (d·sc)·q - dmin·m, so kernels sum q·x over a
// chunk and apply the scale once and the min once against the chunk's Σx
// (AFFINE) instead of two operations per element.
const AFFINE: bool = true;

fn q4raw(n: u32) -> vec4<f32> {
    let u = vec4<u32>(n & 0xFFu, (n >> 8u) & 0xFFu, (n >> 16u) & 0xFFu, n >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388608.0);
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = e / 256u;
    let j = (e % 256u) / 32u;
    let base = 9u * b + 1u + 2u * (j / 2u);
    let sh = (j % 2u) * 4u;
    let qa = w[base];
    let qb = w[base + 1u];
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q4raw((qa.x >> sh) & m), q4raw((qa.y >> sh) & m), q4raw((qa.z >> sh) & m), q4raw((qa.w >> sh) & m),
        q4raw((qb.x >> sh) & m), q4raw((qb.y >> sh) & m), q4raw((qb.z >> sh) & m), q4raw((qb.w >> sh) & m));
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return q4kscale(e / 256u, (e % 256u) / 32u).x;
}

// chunkscales is (d·sc, dmin·m): the sub-block's scale and min.
fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return q4kscale(e / 256u, (e % 256u) / 32u);
}

// q4_K weights: GGUF's 144-byte super-blocks (nine vec4<u32>; blocks never
// straddle a row, rows are whole super-blocks) with their 128 bytes of
// nibbles reordered at upload (RepackQ4_K): sub-block s (32 elements) is
// the 16 bytes from byte 16 + 16·s, element l < 16 the low nibble of byte
// l, element l + 16 its high nibble, as in a q4_0 block. (GGUF interleaves
// pairs of sub-blocks within 32 bytes, so a thread reading one sub-block
// loaded bytes its neighbour loaded too.) The first 16 bytes hold the
// half-precision d and dmin and the 6-bit sub-block scales and mins (see
// q4kscale). Element x = d·sc·q - dmin·m for sub-block scale sc and min m,
// exactly as GGUF (and the CPU engine) decode it. A CHUNK is one
// sub-block: 32 elements from one 16-byte load and the block header.
const CHUNK: u32 = 32u;

// q4kscale is (d·sc, dmin·m) of sub-block j of super-block b: GGUF's
// get_scale_min_k4 values, which RepackQ4_K re-split so each takes two
// shifts: the low nibbles of sc[0..7] in header word 1 and of m[0..7] in
// word 2, their top two bits in word 3 (sc at bit 2j, m at 16 + 2j).
fn q4kscale(b: u32, j: u32) -> vec2<f32> {
    let hdr = w[9u * b];
    let dm = unpack2x16float(hdr.x);
    let sc = ((hdr.y >> (4u * j)) & 0xFu) | (((hdr.w >> (2u * j)) & 3u) << 4u);
    let mn = ((hdr.z >> (4u * j)) & 0xFu) | (((hdr.w >> (16u + 2u * j)) & 3u) << 4u);
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
    let v = w[9u * b + 1u + j][(l % 16u) / 4u];
    return q4k4((v >> ((l / 16u) * 4u)) & 0x0F0F0F0Fu, q4kscale(b, j));
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = e / 256u;
    let j = (e % 256u) / 32u;
    let s = q4kscale(b, j);
    let q = w[9u * b + 1u + j];
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q4k4(q.x & m, s), q4k4(q.y & m, s), q4k4(q.z & m, s), q4k4(q.w & m, s),
        q4k4((q.x >> 4u) & m, s), q4k4((q.y >> 4u) & m, s), q4k4((q.z >> 4u) & m, s), q4k4((q.w >> 4u) & m, s));
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
    let q = w[9u * (e / 256u) + 1u + (e % 256u) / 32u];
    let m = 0x0F0F0F0Fu;
    return array<vec4<f32>, 8>(
        q4raw(q.x & m), q4raw(q.y & m), q4raw(q.z & m), q4raw(q.w & m),
        q4raw((q.x >> 4u) & m), q4raw((q.y >> 4u) & m), q4raw((q.z >> 4u) & m), q4raw((q.w >> 4u) & m));
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return q4kscale(e / 256u, (e % 256u) / 32u).x;
}

// chunkscales is (d·sc, dmin·m): the sub-block's scale and min.
fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return q4kscale(e / 256u, (e % 256u) / 32u);
}

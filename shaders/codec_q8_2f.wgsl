// q8_2f weights (tensor/side.go): 66-byte blocks of 64, each padded to 80
// bytes at upload (PadBlocks): 64 int8 (element j is byte j), the f16 d at
// byte 64. The column field follows the blocks (Q82Tail): from u32 word
// soff, the row length cols, then for each row the u32 word where its
// column scales start (four-word aligned; a fused or stacked weight's parts
// and a bank's experts each have their own), then the fields as f16, two a
// word (column i in the low half when i is even).
// x = d·q·c_i: qv is q·c_i (exact: 8 × 11 significant bits), the chunk
// scale d, the same float32 value as the CPU's (d·q)·c_i. A CHUNK is half a
// block; chunks never cross rows (cols is a multiple of 64).
const BLK: u32 = 64u;
const PADV: u32 = 5u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn q82word(k: u32) -> u32 {
    return w[k / 4u][k % 4u];
}

// q82col is the u32 word holding element e's column scale.
fn q82col(e: u32, soff: u32) -> u32 {
    let cols = q82word(soff);
    return q82word(soff + 1u + e / cols) + (e % cols) / 2u;
}

// q82h is four column scales from two words of f16 pairs.
fn q82h(a: u32, b: u32) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(a), unpack2x16float(b));
}

// q82x4 is four int8 of one u32, exactly (codec_q8_0.wgsl's trick).
fn q82x4(q: u32) -> vec4<f32> {
    let b = q ^ 0x80808080u;
    let u = vec4<u32>(b & 0xFFu, (b >> 8u) & 0xFFu, (b >> 16u) & 0xFFu, b >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388736.0);
}

// q82q is the u32 holding int8 elements e..e+3 (e a multiple of 4).
fn q82q(e: u32) -> u32 {
    let i = (e / 64u) * 80u + e % 64u;
    return w[i / 16u][(i % 16u) / 4u];
}

fn qv4(e: u32, soff: u32) -> vec4<f32> {
    // e a multiple of 4: its scales are two words at an even word k.
    let k = q82col(e, soff);
    let c = w[k / 4u];
    let lo = select(c.x, c.z, k % 4u == 2u);
    let hi = select(c.y, c.w, k % 4u == 2u);
    return q82x4(q82q(e)) * q82h(lo, hi);
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    // A chunk's 32 scales are four whole vec4s (k a multiple of 16).
    let k = q82col(e, soff) / 4u;
    let c0 = w[k];
    let c1 = w[k + 1u];
    let c2 = w[k + 2u];
    let c3 = w[k + 3u];
    let i = ((e / 64u) * 80u + e % 64u) / 16u;
    let a = w[i];
    let b = w[i + 1u];
    return array<vec4<f32>, 8>(
        q82x4(a.x) * q82h(c0.x, c0.y), q82x4(a.y) * q82h(c0.z, c0.w),
        q82x4(a.z) * q82h(c1.x, c1.y), q82x4(a.w) * q82h(c1.z, c1.w),
        q82x4(b.x) * q82h(c2.x, c2.y), q82x4(b.y) * q82h(c2.z, c2.w),
        q82x4(b.z) * q82h(c3.x, c3.y), q82x4(b.w) * q82h(c3.z, c3.w));
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(wf16(e / 64u, 64u), 0.0);
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return chunkscales(e, soff).x;
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    return qv4(e, soff) * chunkscale(e, soff);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let d = chunkscale(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 8u; i++) {
        r[i] = r[i] * d;
    }
    return r;
}

// q8_2f weights (tensor/side.go): 66-byte blocks of 64, each padded to 80
// bytes at upload (PadBlocks): 64 int8 (element j is byte j), the f16 d at
// byte 64. The column field follows the blocks (Q82Tail): from u32 word
// soff, the row length cols, then for each row the u32 word where its
// column scales start (four-word aligned; a fused or stacked weight's parts
// and a bank's experts each have their own), then the fields as f32.
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

// q82col is the u32 word of element e's column scale.
fn q82col(e: u32, soff: u32) -> u32 {
    let cols = q82word(soff);
    return q82word(soff + 1u + e / cols) + e % cols;
}

// q82x4 is four int8 of one u32, exactly (codec_q8_0.wgsl's trick).
fn q82x4(q: u32) -> vec4<f32> {
    let b = q ^ 0x80808080u;
    let u = vec4<u32>(b & 0xFFu, (b >> 8u) & 0xFFu, (b >> 16u) & 0xFFu, b >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388736.0);
}

// q82word4 is the u32 holding int8 elements e..e+3 (e a multiple of 4).
fn q82q(e: u32) -> u32 {
    let i = (e / 64u) * 80u + e % 64u;
    return w[i / 16u][(i % 16u) / 4u];
}

fn qv4(e: u32, soff: u32) -> vec4<f32> {
    let k = q82col(e, soff);
    return q82x4(q82q(e)) * bitcast<vec4<f32>>(w[k / 4u]);
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let k = q82col(e, soff) / 4u;
    let i = ((e / 64u) * 80u + e % 64u) / 16u;
    let a = w[i];
    let b = w[i + 1u];
    return array<vec4<f32>, 8>(
        q82x4(a.x) * bitcast<vec4<f32>>(w[k]), q82x4(a.y) * bitcast<vec4<f32>>(w[k + 1u]),
        q82x4(a.z) * bitcast<vec4<f32>>(w[k + 2u]), q82x4(a.w) * bitcast<vec4<f32>>(w[k + 3u]),
        q82x4(b.x) * bitcast<vec4<f32>>(w[k + 4u]), q82x4(b.y) * bitcast<vec4<f32>>(w[k + 5u]),
        q82x4(b.z) * bitcast<vec4<f32>>(w[k + 6u]), q82x4(b.w) * bitcast<vec4<f32>>(w[k + 7u]));
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

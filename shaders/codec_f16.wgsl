// f16 weights: the tensor's bytes as they are, two halves per u32 (low half
// first, which is little-endian byte order), widened with unpack2x16float
// because the subset has no half-precision type. One vec4<u32> is 8 elements.
const CHUNK: u32 = 8u;

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let q = w[e / 8u];
    let lo = select(q.xy, q.zw, (e & 4u) != 0u);
    let a = unpack2x16float(lo.x);
    let b = unpack2x16float(lo.y);
    return vec4<f32>(a.x, a.y, b.x, b.y);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 2> {
    let q = w[e / 8u];
    let a = unpack2x16float(q.x);
    let b = unpack2x16float(q.y);
    let c = unpack2x16float(q.z);
    let d = unpack2x16float(q.w);
    return array<vec4<f32>, 2>(vec4<f32>(a.x, a.y, b.x, b.y), vec4<f32>(c.x, c.y, d.x, d.y));
}

// fetchq and chunkscale split fetchc (see codec_f32.wgsl).
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 2> {
    return fetchc(e, soff);
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return 1.0;
}

// chunkscales is (chunkscale, 0): this codec's values are its quants times
// the chunk scale, with no offset (AFFINE is false).
const AFFINE: bool = false;

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

// f32 weights: the tensor's bytes as they are. One vec4<u32> is 4 elements.
const CHUNK: u32 = 4u;

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(w[e / 4u]);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 1> {
    return array<vec4<f32>, 1>(bitcast<vec4<f32>>(w[e / 4u]));
}

// fetchq and chunkscale split fetchc for kernels that apply a chunk's
// scale once to a sum instead of to every element: fetchc(e) equals
// fetchq(e) * chunkscale(e).
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 1> {
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

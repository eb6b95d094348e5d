// f32 weights: the tensor's bytes as they are. One vec4<u32> is 4 elements.
const CHUNK: u32 = 4u;

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(w[e / 4u]);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 1> {
    return array<vec4<f32>, 1>(bitcast<vec4<f32>>(w[e / 4u]));
}

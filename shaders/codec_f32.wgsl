// f32 weights: the tensor's bytes as they are, one u32 per element.
fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<f32>(w[e]), bitcast<f32>(w[e + 1u]), bitcast<f32>(w[e + 2u]), bitcast<f32>(w[e + 3u]));
}

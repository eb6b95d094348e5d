// f16 weights: the tensor's bytes as they are, two halves per u32 (low half
// first, which is little-endian byte order), widened with unpack2x16float
// because the subset has no half-precision type.
fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let a = unpack2x16float(w[e / 2u]);
    let b = unpack2x16float(w[e / 2u + 1u]);
    return vec4<f32>(a.x, a.y, b.x, b.y);
}

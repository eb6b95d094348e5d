// q4_0 weights, repacked at upload like q8_0: the quant plane holds each
// block's 16 nibble bytes as 4 u32, the scale plane (from u32 `soff`) the f16
// scales two per u32. Within a block, element j < 16 is the low nibble of
// byte j and element j+16 its high nibble; the value is (nibble-8)*d.
fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let b = e / 32u;
    let j = e % 32u;
    let q = w[b * 4u + (j % 16u) / 4u];
    let n = (q >> select(0u, 4u, j >= 16u)) & 0x0F0F0F0Fu;
    let d2 = unpack2x16float(w[soff + b / 2u]);
    let d = select(d2.x, d2.y, (b & 1u) == 1u);
    let v = vec4<f32>(f32(n & 0xFFu), f32((n >> 8u) & 0xFFu), f32((n >> 16u) & 0xFFu), f32(n >> 24u));
    return (v - vec4<f32>(8.0)) * d;
}

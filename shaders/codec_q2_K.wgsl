// q2_K weights: GGUF's 84-byte super-blocks of 256, each padded to 96
// bytes at upload (PadBlocks): 16 bytes of 4-bit scale and min pairs, 64
// bytes of bit pairs, f16 d, f16 dmin. Element p of a block: pair
// (p%128)/32 of byte 16 + 32·(p/128) + p%32; scale byte p/16. x =
// d·sc·q − dmin·m (AFFINE). A CHUNK is 16 elements, one scale's, one
// vec4 of quants.
const BLK: u32 = 256u;
const PADV: u32 = 6u;
const CHUNK: u32 = 16u;
const AFFINE: bool = true;

// bytes4 is the four bytes of v as floats (the float trick of
// codec_q4_0.wgsl) minus off.
fn bytes4(v: u32, off: f32) -> vec4<f32> {
    let u = vec4<u32>(v & 0xFFu, (v >> 8u) & 0xFFu, (v >> 16u) & 0xFFu, v >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388608.0 + off);
}

// fetchq is a chunk's 16 bit pairs: one vec4 of the block's quants, the
// pair (p%128)/32 of each byte.
fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let p = e % 256u;
    let q = w[6u * (e / 256u) + 1u + 2u * (p / 128u) + (p % 32u) / 16u];
    let sh = 2u * ((p % 128u) / 32u);
    let m = 0x03030303u;
    return array<vec4<f32>, 4>(bytes4((q.x >> sh) & m, 0.0), bytes4((q.y >> sh) & m, 0.0),
        bytes4((q.z >> sh) & m, 0.0), bytes4((q.w >> sh) & m, 0.0));
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    var q = fetchq(e - e % 16u, soff);
    let sm = chunkscales(e, soff);
    return q[(e % 16u) / 4u] * sm.x - vec4<f32>(sm.y);
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 4> {
    let sm = chunkscales(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 4u; i++) {
        r[i] = r[i] * sm.x - vec4<f32>(sm.y);
    }
    return r;
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return chunkscales(e, soff).x;
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let sc = wbyte(b, (e % 256u) / 16u);
    return vec2<f32>(wf16(b, 80u) * f32(sc & 0xFu), wf16(b, 82u) * f32(sc >> 4u));
}

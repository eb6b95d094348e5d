// mxfp4 weights: GGUF's 17-byte blocks of 32, each padded to 32 bytes at
// upload (PadBlocks): an e8m0 exponent, 16 bytes of e2m1 nibbles. x =
// fp4[q]·2^(e−128) (ggml's doubled code book and halved scale). A CHUNK is
// one block.
const BLK: u32 = 32u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 32u;
    return fp4[(wbyte(e / 32u, 1u + j % 16u) >> (4u * (j / 16u))) & 0xFu];
}

// chunkscales is ggml_e8m0_to_fp32_half of the block's exponent.
fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let x = wbyte(e / 32u, 0u);
    return vec2<f32>(bitcast<f32>(select((x - 1u) << 23u, 0x00200000u << x, x < 2u)), 0.0);
}

// q8_row weights (tensor/seed.go): 68-byte blocks of 64, each padded to 80
// bytes at upload (PadBlocks): 64 int8 (element j is byte j), then the f32
// scale s at byte 64. x = s·q. A CHUNK is half a block.
const BLK: u32 = 64u;
const PADV: u32 = 5u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    return f32(bitcast<i32>(wbyte(e / 64u, e % 64u) << 24u) >> 24u);
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(wword(e / 64u, 64u)), 0.0);
}

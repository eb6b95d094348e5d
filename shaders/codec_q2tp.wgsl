// q2tp weights (tensor/seed.go): 20-byte blocks of 64, each padded to 32
// bytes at upload (PadBlocks): two 8-byte chunks (chunk k at byte 8k: a u32
// of low bits, a u32 of high bits; element i's code is bit i of each), f16
// d at byte 16, the chunks' rungs at byte 18. x = a·q − 1.5·a with a =
// d·ladder2[r]; rung 0 is zero (AFFINE). A CHUNK is one 8-byte chunk.
const BLK: u32 = 64u;
const PADV: u32 = 2u;
const CHUNK: u32 = 32u;
const AFFINE: bool = true;

var<private> ladder2: array<u32, 16> = array<u32, 16>(0x00000000u, 0x3F800000u, 0x3F3504F3u, 0x3F000000u,
    0x3EB504F3u, 0x3E800000u, 0x3E3504F3u, 0x3E000000u, 0x3DB504F3u, 0x3D800000u, 0x3D3504F3u, 0x3D000000u,
    0x3CB504F3u, 0x3C800000u, 0x3C3504F3u, 0x3C000000u);

fn qv(e: u32, soff: u32) -> f32 {
    let j = e % 64u;
    let k = j / 32u;
    let i = j % 32u;
    let b = e / 64u;
    let lo = (wword(b, 8u * k) >> i) & 1u;
    let hi = (wword(b, 8u * k + 4u) >> i) & 1u;
    return f32(lo | (hi << 1u));
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 64u;
    let r = (wbyte(b, 18u) >> (4u * ((e % 64u) / 32u))) & 0xFu;
    let a = wf16(b, 16u) * bitcast<f32>(ladder2[r]);
    return vec2<f32>(a, a * 1.5);
}

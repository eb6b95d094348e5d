// iq2_xxs weights: GGUF's 66-byte super-blocks of 256, each padded to 80
// bytes at upload (PadBlocks), the iq2xxs code book (256 entries of 8
// bytes) appended at word soff (GridTail). Per 32 elements (sub-block s),
// 8 bytes from 2 + 8s: four grid indices, then a u32 of four 7-bit sign
// indices and the 4-bit scale. x = d·(0.5+scale)·0.25·grid·sign, exactly
// as GGUF (and the CPU engine) decode it. A CHUNK is one sub-block.
const BLK: u32 = 256u;
const PADV: u32 = 5u;
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

fn qv(e: u32, soff: u32) -> f32 {
    let b = e / 256u;
    let p = e % 256u;
    let s = p / 32u;
    let l = (p % 32u) / 8u;
    let j = p % 8u;
    let g = f32(gbyte(soff, 8u, wbyte(b, 2u + 8u * s + l), j));
    let aux = wword(b, 6u + 8u * s);
    return select(g, -g, ksign((aux >> (7u * l)) & 127u, j));
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    let b = e / 256u;
    let aux = wword(b, 6u + 8u * ((e % 256u) / 32u));
    return vec2<f32>(wf16(b, 0u) * (0.5 + f32(aux >> 28u)) * 0.25, 0.0);
}

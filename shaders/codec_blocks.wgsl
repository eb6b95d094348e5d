// Byte access for the codecs whose GGUF blocks are padded at upload to
// whole vec4<u32>s (PadBlocks): every block starts on a 16-byte boundary
// with its bytes at their GGUF offsets. The codec file defines BLK
// (elements per block), PADV (vec4<u32>s per padded block), qv(e) (element
// e's quantized value; soff locates the IQ code book) and chunkscales(e, soff) ((a, b) with x = a·q − b
// over e's chunk); codec_chunk16/32.wgsl build the fetch functions on them.

// wbyte is byte off of padded block b.
fn wbyte(b: u32, off: u32) -> u32 {
    let i = b * PADV * 16u + off;
    return (w[i / 16u][(i % 16u) / 4u] >> (8u * (i % 4u))) & 0xFFu;
}

// wf16 is the half-precision value at even byte off of padded block b.
fn wf16(b: u32, off: u32) -> f32 {
    let i = b * PADV * 16u + off;
    return unpack2x16float(w[i / 16u][(i % 16u) / 4u] >> (8u * (i % 4u))).x;
}

// wword is the little-endian u32 of the four bytes from off of padded
// block b (any alignment).
fn wword(b: u32, off: u32) -> u32 {
    return wbyte(b, off) | (wbyte(b, off + 1u) << 8u) | (wbyte(b, off + 2u) << 16u) | (wbyte(b, off + 3u) << 24u);
}

// gbyte is byte j of entry i (n bytes each) of the IQ code book the upload
// appends to the weight buffer at u32 word soff (GridTail).
fn gbyte(soff: u32, n: u32, i: u32, j: u32) -> u32 {
    let k = soff * 4u + n * i + j;
    return (w[k / 16u][(k % 16u) / 4u] >> (8u * (k % 4u))) & 0xFFu;
}

// ksign is sign bit j of ggml's ksigns_iq2xs entry s: the seven stored
// bits, the eighth their parity.
fn ksign(s: u32, j: u32) -> bool {
    if (j < 7u) {
        return ((s >> j) & 1u) == 1u;
    }
    return (countOneBits(s) & 1u) == 1u;
}

// tq1_0 weights, repacked at upload into two planes: the quant plane holds
// each 256-element super-block's 48 bytes of five base-3 digits (three
// vec4<u32>), the scale plane (from u32 `soff`) 6 bytes per super-block:
// the 4 bytes of four digits, then the f16 d (two super-blocks per three
// u32, as codec_q5_0.wgsl's). Digit n of byte v is
// ((v·3^n mod 256)·3) >> 8, as ggml decodes it; elements 0..159 are digit
// p/32 of byte p%32, 160..239 digit (p−160)/16 of byte 32 + p%16, 240..255
// digit (p−240)/4 of the scale word's byte p%4. x = (digit−1)·d. A CHUNK is
// 32 elements: chunk c < 5 is digit c of bytes 0..31, chunks 5 and 6 digits
// 2c−10 and 2c−9 of bytes 32..47, chunk 7 digit 4 of bytes 32..47 then the
// scale word's four digits (16 elements each half). digits() takes one
// digit of four bytes at once, in 16-bit lanes.
const CHUNK: u32 = 32u;
const AFFINE: bool = false;

// digits is digit 3^n = p of each byte of v, one per byte: the bytes are
// multiplied two at a time in 16-bit lanes (255·81 < 2^16), reduced mod
// 256, times 3, and bits 8..9 of each lane's product are the digit.
fn digits(v: u32, p: u32) -> u32 {
    let lo = (((v & 0x00FF00FFu) * p) & 0x00FF00FFu) * 3u;
    let hi = ((((v >> 8u) & 0x00FF00FFu) * p) & 0x00FF00FFu) * 3u;
    return ((lo >> 8u) & 0x00030003u) | (hi & 0x03000300u);
}

fn pow3(n: u32) -> u32 {
    return select(select(select(select(1u, 3u, n == 1u), 9u, n == 2u), 27u, n == 3u), 81u, n == 4u);
}

// t2x4 is four values q−1 from the bytes of n (each 0..2), by the float
// trick of codec_q4_0.wgsl.
fn t2x4(n: u32) -> vec4<f32> {
    let u = vec4<u32>(n & 0xFFu, (n >> 8u) & 0xFFu, (n >> 16u) & 0xFFu, n >> 24u) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(u) - vec4<f32>(8388609.0);
}

fn word(i: u32) -> u32 {
    return w[i / 4u][i % 4u];
}

// head is super-block b's scale-plane entry: (the four-digit bytes, d's
// bits in the low half). An even block's entry starts on a word, an odd
// one's mid word.
fn head(b: u32, soff: u32) -> vec2<u32> {
    let i = soff + 3u * (b / 2u) + (b & 1u);
    let a = word(i);
    let c = word(i + 1u);
    return select(vec2<u32>((a >> 16u) | (c << 16u), c >> 16u), vec2<u32>(a, c), (b & 1u) == 0u);
}

fn fetchq(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let b = e / 256u;
    let c = (e / 32u) % 8u;
    let hi5 = c >= 5u;
    let last = c == 7u;
    let va = w[3u * b + select(0u, 2u, hi5)];
    let vb = w[3u * b + 1u];
    let qh = head(b, soff).x;
    let p1 = pow3(select(c, select(2u * c - 10u, 4u, last), hi5));
    let p2 = pow3(select(c, 2u * c - 9u, hi5));
    let pk = vec4<u32>(1u, 3u, 9u, 27u);
    var r: array<vec4<f32>, 8>;
    for (var k = 0u; k < 4u; k++) {
        r[k] = t2x4(digits(va[k], p1));
        let v2 = select(select(vb[k], va[k], hi5), qh, last);
        r[4u + k] = t2x4(digits(v2, select(p2, pk[k], last)));
    }
    return r;
}

fn chunkscale(e: u32, soff: u32) -> f32 {
    return unpack2x16float(head(e / 256u, soff).y).x;
}

fn chunkscales(e: u32, soff: u32) -> vec2<f32> {
    return vec2<f32>(chunkscale(e, soff), 0.0);
}

fn fetch4(e: u32, soff: u32) -> vec4<f32> {
    let b = e / 256u;
    let c = (e / 32u) % 8u;
    let second = (e % 32u) >= 16u;
    let k = (e % 16u) / 4u;
    let hi5 = c >= 5u;
    let h = head(b, soff);
    let v = w[3u * b + select(select(0u, 1u, second), 2u, hi5)][k];
    var n = select(c, select(2u * c - 10u, 4u, c == 7u), hi5);
    if (second) {
        n = select(c, select(2u * c - 9u, k, c == 7u), hi5);
    }
    let word = select(v, h.x, second && c == 7u);
    return t2x4(digits(word, pow3(n))) * unpack2x16float(h.y).x;
}

fn fetchc(e: u32, soff: u32) -> array<vec4<f32>, 8> {
    let s = chunkscale(e, soff);
    var r = fetchq(e, soff);
    for (var i = 0u; i < 8u; i++) {
        r[i] = r[i] * s;
    }
    return r;
}

package tensor

import (
	"encoding/binary"
	"math"
)

// The seed engine's own codecs (q8_row, q4_tiled, q4tp, q2tp, q1, q1g),
// carried in CMF as block codecs: every block holds its own scales, so a
// row (and any range of rows) decodes on its own, as for the GGUF codecs.
// docs/cmf.md specifies each layout and decode formula. Each codec is three
// functions over one block: val (element j's value; the decoder is val over
// the block, so both agree by construction), enc (round-to-nearest from
// float32, choosing the block's scales) and set (re-code element j to the
// nearest value the block's scales allow — what GPTQ's error feedback uses,
// see SetElem). Products are converted to float32 before any subtraction
// so the compiler cannot fuse them, and the device evaluates the same
// expressions (shaders/codec_<name>.wgsl).

type seedCodec struct {
	val func(b []byte, j int) float32
	enc func(dst []byte, x []float32)
	set func(b []byte, j int, v float32)
}

var seedCodecs = [NumCodecs]*seedCodec{
	Q8_ROW:   {valQ8Row, encQ8Row, setQ8Row},
	Q4_TILED: {valQ4Tiled, encQ4Tiled, setQ4Tiled},
	Q4TP:     {valQ4TP, encQ4TP, setQ4TP},
	Q2TP:     {valQ2TP, encQ2TP, setQ2TP},
	Q1:       {valSign(4), encSign(4), setSign},
	Q1G:      {valSign(16), encSign(16), setSign},
	Q1T:      {valQ1T, encQ1T, setQ1T},
	Q4_0:     {valQ4_0, nil, setQ4_0},
}

func init() {
	for c, s := range seedCodecs {
		if s == nil || s.enc == nil {
			continue
		}
		blockDecoders[c] = func(y []float32, b []byte) {
			for j := range y {
				y[j] = s.val(b, j)
			}
		}
		blockEncoders[c] = s.enc
	}
}

// SetElem re-codes element j of an encoded block of codec c (BlockBytes
// bytes) to the representable value nearest v under the block's current
// scales, leaving the scales and the other elements as they are, and
// returns the element's new decoded value. ok is false for codecs without
// it (GPTQ in package quant uses it: the block's scales are fixed first,
// then each column is rounded in turn).
func SetElem(c Codec, block []byte, j int, v float32) (got float32, ok bool) {
	if !c.Valid() || seedCodecs[c] == nil || seedCodecs[c].set == nil {
		return 0, false
	}
	s := seedCodecs[c]
	s.set(block, j, v)
	return s.val(block, j), true
}

// CanSetElem reports whether SetElem supports codec c.
func CanSetElem(c Codec) bool { return c.Valid() && seedCodecs[c] != nil && seedCodecs[c].set != nil }

func nearestCode(v, a float32, off float32, top int) int {
	if a == 0 {
		return 0
	}
	return roundClamp(v/a+off, 0, top)
}

// q8_row: 64 int8 (element j is byte j), then the f32 scale s at byte
// 64. x = s·q. The seed's per-row scale, one per 64 elements.
func valQ8Row(b []byte, j int) float32 {
	return float32(int8(b[j])) * math.Float32frombits(binary.LittleEndian.Uint32(b[64:]))
}

func encQ8Row(dst []byte, x []float32) {
	s := amaxOf(x) / 127
	binary.LittleEndian.PutUint32(dst[64:], math.Float32bits(s))
	for j, v := range x {
		setQ8Row(dst, j, v)
	}
}

func setQ8Row(b []byte, j int, v float32) {
	s := math.Float32frombits(binary.LittleEndian.Uint32(b[64:]))
	b[j] = byte(int8(nearestCode(v, s, 127, 254) - 127))
}

// q4_tiled: f16 d, then 16 bytes of nibbles in element order (element j
// is the low nibble of byte 2+j/2 when j is even, the high one when odd).
// x = d·(q−8).
func valQ4Tiled(b []byte, j int) float32 {
	q := b[2+j/2] >> (4 * (j & 1)) & 0xf
	return f16At(b, 0) * float32(int(q)-8)
}

func encQ4Tiled(dst []byte, x []float32) {
	putF16(dst, 0, signedMax(x)/-8)
	for j, v := range x {
		setQ4Tiled(dst, j, v)
	}
}

func setQ4Tiled(b []byte, j int, v float32) {
	q := nearestCode(v, f16At(b, 0), 8, 15)
	sh := 4 * (j & 1)
	b[2+j/2] = b[2+j/2]&^(0xf<<sh) | byte(q)<<sh
}

// ladder4 is q4tp's scale ladder, 2^(−r/4): a sub-block's scale is d times
// one rung. ladder2 is q2tp's: rung 0 is zero, rung r > 0 is 2^(−(r−1)/2).
var ladder4, ladder2 [16]float32

func init() {
	for r := range 16 {
		ladder4[r] = float32(math.Exp2(-float64(r) / 4))
		if r > 0 {
			ladder2[r] = float32(math.Exp2(-float64(r-1) / 2))
		}
	}
}

// q4tp: two 32-element sub-blocks of 16 bytes of nibbles (element j of
// sub-block k: byte 16k + j%16, low nibble for j < 16), the f16 d at byte
// 32, the two rungs at byte 34 (k = 0 low nibble), byte 35 zero. x =
// (d·2^(−r_k/4))·(q−8).
func q4tpScale(b []byte, k int) float32 {
	return f16At(b, 32) * ladder4[b[34]>>(4*k)&0xf]
}

func valQ4TP(b []byte, j int) float32 {
	k, i := j/32, j%32
	q := b[16*k+i%16] >> (4 * (i / 16)) & 0xf
	return val4(q4tpScale(b, k), int(q))
}

func setQ4TP(b []byte, j int, v float32) {
	k, i := j/32, j%32
	q := nearestCode(v, q4tpScale(b, k), 8, 15)
	sh := 4 * (i / 16)
	o := 16*k + i%16
	b[o] = b[o]&^(0xf<<sh) | byte(q)<<sh
}

// bestRung picks, for the 32 values x with block scale d, the ladder rung
// whose round-to-nearest codes (q in 0..top, value val(a, q)) leave the
// least squared error. Ties go to the lower rung.
func bestRung(x []float32, d float32, ladder *[16]float32, off float32, top int, val func(a float32, q int) float32) byte {
	best, bestErr := 0, float32(math.Inf(1))
	for r := range 16 {
		a := d * ladder[r]
		var e float32
		for _, v := range x {
			t := v - val(a, nearestCode(v, a, off, top))
			e += t * t
		}
		if e < bestErr {
			best, bestErr = r, e
		}
	}
	return byte(best)
}

func val4(a float32, q int) float32 { return a * float32(q-8) }
func val2(a float32, q int) float32 { return float32(a*float32(q)) - float32(a*1.5) }

func encQ4TP(dst []byte, x []float32) {
	clear(dst)
	// d covers the larger sub-block with room: the rung search picks its
	// scale among amax/6, amax/7.1, amax/8.5, ….
	d := putF16(dst, 32, max(amaxOf(x[:32]), amaxOf(x[32:]))/6)
	r0 := bestRung(x[:32], d, &ladder4, 8, 15, val4)
	r1 := bestRung(x[32:], d, &ladder4, 8, 15, val4)
	dst[34] = r0 | r1<<4
	for j, v := range x {
		setQ4TP(dst, j, v)
	}
}

// q2tp: two 32-element chunks of 8 bytes (chunk k at byte 8k: a u32 of
// low bits, then a u32 of high bits; element j's code q is bit j of each),
// the f16 d at byte 16, the two rungs at byte 18, byte 19 zero. x =
// a·q − 1.5·a with a = d·ladder2[r_k]; rung 0 (a = 0) is the zero rung, a
// chunk of zeros.
func q2tpScale(b []byte, k int) float32 {
	return f16At(b, 16) * ladder2[b[18]>>(4*k)&0xf]
}

func valQ2TP(b []byte, j int) float32 {
	k, i := j/32, j%32
	lo := binary.LittleEndian.Uint32(b[8*k:]) >> i & 1
	hi := binary.LittleEndian.Uint32(b[8*k+4:]) >> i & 1
	return val2(q2tpScale(b, k), int(lo|hi<<1))
}

func setQ2TP(b []byte, j int, v float32) {
	k, i := j/32, j%32
	q := uint32(nearestCode(v, q2tpScale(b, k), 1.5, 3))
	lo := binary.LittleEndian.Uint32(b[8*k:])&^(1<<i) | (q&1)<<i
	hi := binary.LittleEndian.Uint32(b[8*k+4:])&^(1<<i) | (q>>1)<<i
	binary.LittleEndian.PutUint32(b[8*k:], lo)
	binary.LittleEndian.PutUint32(b[8*k+4:], hi)
}

func encQ2TP(dst []byte, x []float32) {
	clear(dst)
	// Rung 1 is the chunk of larger magnitude at a = amax/1.5.
	d := putF16(dst, 16, max(amaxOf(x[:32]), amaxOf(x[32:]))/1.5)
	r0 := bestRung(x[:32], d, &ladder2, 1.5, 3, val2)
	r1 := bestRung(x[32:], d, &ladder2, 1.5, 3, val2)
	dst[18] = r0 | r1<<4
	for j, v := range x {
		setQ2TP(dst, j, v)
	}
}

// q1 (n = 4) and q1g (n = 16): n bytes of sign bits (bit j%8 of byte j/8
// set: element j is +d), then the f16 d. x = 2d·s − d, s the bit. d is
// the block's mean magnitude (the scale that minimizes the squared error
// of sign quantization).
func valSign(n int) func(b []byte, j int) float32 {
	return func(b []byte, j int) float32 {
		d := f16At(b, n)
		s := float32(b[j/8] >> (j % 8) & 1)
		return float32(2*d*s) - d
	}
}

func encSign(n int) func(dst []byte, x []float32) {
	return func(dst []byte, x []float32) {
		var sum float64
		for _, v := range x {
			sum += math.Abs(float64(v))
		}
		putF16(dst, n, float32(sum/float64(len(x))))
		clear(dst[:n])
		for j, v := range x {
			setSign(dst, j, v)
		}
	}
}

func setSign(b []byte, j int, v float32) {
	if v >= 0 {
		b[j/8] |= 1 << (j % 8)
	} else {
		b[j/8] &^= 1 << (j % 8)
	}
}

// q4_0 (GGUF's): GPTQ re-codes its elements too. Same expression as
// DequantizeQ4_0Block.
func valQ4_0(b []byte, j int) float32 {
	q := b[2+j%16] >> (4 * (j / 16)) & 0xf
	return float32(int(q)-8) * f16At(b, 0)
}

func setQ4_0(b []byte, j int, v float32) {
	q := nearestCode(v, f16At(b, 0), 8, 15)
	sh := 4 * (j / 16)
	o := 2 + j%16
	b[o] = b[o]&^(0xf<<sh) | byte(q)<<sh
}

// Encodes reports whether Quantize (EncodeTensor for a codec with a side
// field) can write codec c: every codec that holds floats.
func Encodes(c Codec) bool {
	switch c {
	case F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q8_2F, BLR:
		return true
	}
	return c.Valid() && blockEncoders[c] != nil
}

// q1t: a ternary base and a sparse overlay. 16 bytes of 2-bit codes t
// (element j: bits 2(j%4) of byte j/4; value t−1), the f16 d at byte 16,
// four overlay entries at byte 18 (a u8 index, ≥ 64 for none, then an int8
// code), bytes 26..27 zero. x_j = d·v_j with v_j the code of the first
// entry whose index is j, else t_j − 1. The overlay carries the block's
// outliers at int8 precision in units of d, so d can fit the ternary bulk.
func q1tCode(b []byte, j int) int {
	for k := range 4 {
		if int(b[18+2*k]) == j {
			return int(int8(b[19+2*k]))
		}
	}
	return int(b[j/4]>>(2*(j%4))&3) - 1
}

func valQ1T(b []byte, j int) float32 { return f16At(b, 16) * float32(q1tCode(b, j)) }

func setQ1T(b []byte, j int, v float32) {
	d := f16At(b, 16)
	for k := range 4 {
		if int(b[18+2*k]) == j {
			b[19+2*k] = byte(int8(nearestCode(v, d, 127, 254) - 127))
			return
		}
	}
	t := nearestCode(v, d, 1, 2)
	sh := 2 * (j % 4)
	b[j/4] = b[j/4]&^(3<<sh) | byte(t)<<sh
}

func encQ1T(dst []byte, x []float32) {
	clear(dst)
	// The overlay: the four elements of largest magnitude (lowest index
	// first on ties).
	var over [4]int
	used := make([]bool, len(x))
	for k := range over {
		best := -1
		for j, v := range x {
			if !used[j] && (best < 0 || abs32(v) > abs32(x[best])) {
				best = j
			}
		}
		over[k], used[best] = best, true
	}
	// d: the ternary scale of least squared error over the rest, among
	// amax·i/16 (rounded to f16 as stored).
	var amax float32
	for j, v := range x {
		if !used[j] {
			amax = max(amax, abs32(v))
		}
	}
	if amax == 0 {
		amax = amaxOf(x) / 127
	}
	bestD, bestErr := float32(0), float32(math.Inf(1))
	for i := 1; i <= 16; i++ {
		d := F16ToF32(F32ToF16(amax * float32(i) / 16))
		var e float32
		for j, v := range x {
			if !used[j] {
				t := v - d*float32(nearestCode(v, d, 1, 2)-1)
				e += t * t
			}
		}
		if e < bestErr {
			bestD, bestErr = d, e
		}
	}
	putF16(dst, 16, bestD)
	for k, j := range over {
		dst[18+2*k] = byte(j)
	}
	for j, v := range x {
		setQ1T(dst, j, v)
	}
}

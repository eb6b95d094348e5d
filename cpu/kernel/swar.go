package kernel

import (
	"encoding/binary"

	"github.com/cortiq/cortiq/tensor"
)

// Portable Int8 dots of q4_0 and q8_0 for the levels without SIMD int8
// kernels (Generic: wasm, and every build without assembly), computing
// what the reference loops dotQ4_0Int8 and dotQ8_0Int8 compute, bit for
// bit: the same exact integer block sums, then the same float32
// operations in the same order.
//
// The integer sums are four products at a time in one 64-bit multiply
// (SIMD within a register). Four weights w_j ≥ 0 sit in 16-bit lanes,
// W = Σ w_j·2^(16j), and four activations in the reverse order,
// X = Σ x_(3-j)·2^(16j) (as a signed integer, modulo 2^64); the lane-3
// coefficient of W·X, bits 48..63, is Σ w_j·x_j. Lanes below carry
// nothing into it as long as each coefficient of a sum of such products
// stays within ±2^15 and the part below bit 48 within ±2^47: adding 2^47
// makes that part non-negative, and an arithmetic shift by 48 leaves the
// signed lane-3 sum. With w ≤ 15 and |x| ≤ 128, four products (sixteen
// weights) keep every coefficient within 16·15·128 = 30720 and the low
// part within 30720·(2^32+2^16+1) < 2^47. q4_0's nibbles are such
// weights; q8_0's bytes w become w+128 = 16·h+l with nibbles h and l,
// Σw·x = 16·Σh·x + Σl·x − 128·Σx.
//
// The activations are laid out for this once per quantized vector
// (q8x.packSWAR): per 8 activations, the even ones and the odd ones.

const (
	nib16    = 0x000f000f000f000f // the low nibble of each 16-bit lane
	swarBias = 1 << 47
)

// swarSum is the signed lane-3 sum of a sum of SWAR products.
func swarSum(p uint64) int32 { return int32(int64(p+swarBias) >> 48) }

// swarInt8Kernels are the Int8 kernels of the codecs above, used where the
// level's int8Kernels has none (prepareMatVec).
var swarInt8Kernels = [tensor.NumCodecs]int8Kernel{
	tensor.Q8_0: int8RowsGeneric(dotQ8_0SWAR),
	tensor.Q4_0: int8RowsGeneric(dotQ4_0SWAR),
}

// packSWAR lays the quantized activations out for the SWAR kernels: for
// the 8 activations 8c..8c+7, sw[2c] holds those at 8c+6, 8c+4, 8c+2, 8c
// and sw[2c+1] those at 8c+7, 8c+5, 8c+3, 8c+1, in 16-bit lanes from the
// lowest.
func (qx *q8x) packSWAR() {
	n := len(qx.q) / 8
	qx.sw = grow(qx.sw, 2*n)
	sw := qx.sw[:2*n]
	for c := range n {
		q := (*[8]int8)(qx.q[8*c:])
		sw[2*c] = uint64(int64(q[6]) + int64(q[4])<<16 + int64(q[2])<<32 + int64(q[0])<<48)
		sw[2*c+1] = uint64(int64(q[7]) + int64(q[5])<<16 + int64(q[3])<<32 + int64(q[1])<<48)
	}
	qx.swOK = true
}

// dotQ4_0SWAR is dotQ4_0Int8 with the SWAR block sums.
func dotQ4_0SWAR(row []byte, qx *q8x) float32 {
	nb := len(qx.d)
	row, sw, d, xs := row[:18*nb], qx.sw[:8*nb], qx.d[:nb], qx.s[:nb]
	var s float32
	for b := range nb {
		blk := (*[18]byte)(row[18*b:])
		x := (*[8]uint64)(sw[8*b:])
		v0 := binary.LittleEndian.Uint64(blk[2:])  // elements 0..7 (low nibbles), 16..23 (high)
		v1 := binary.LittleEndian.Uint64(blk[10:]) // 8..15, 24..31
		// The nibbles of the even and the odd bytes, in 16-bit lanes.
		lo := (v0&nib16)*x[0] + (v0>>8&nib16)*x[1] + (v1&nib16)*x[2] + (v1>>8&nib16)*x[3]
		hi := (v0>>4&nib16)*x[4] + (v0>>12&nib16)*x[5] + (v1>>4&nib16)*x[6] + (v1>>12&nib16)*x[7]
		isum := swarSum(lo) + swarSum(hi)
		dw := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		s += dw * (d[b]*float32(isum) - 8*xs[b])
	}
	return s
}

// dotQ8_0SWAR is dotQ8_0Int8 with the SWAR block sums.
func dotQ8_0SWAR(row []byte, qx *q8x) float32 {
	nb := len(qx.d)
	row, sw, d, hs := row[:34*nb], qx.sw[:8*nb], qx.d[:nb], qx.hs[:2*nb]
	var s float32
	for b := range nb {
		blk := (*[34]byte)(row[34*b:])
		x := (*[8]uint64)(sw[8*b:])
		// w+128 of eight weights a word; the low and high nibbles of its
		// even and odd bytes, in 16-bit lanes.
		u := binary.LittleEndian.Uint64(blk[2:]) ^ 0x8080808080808080
		lo0 := (u&nib16)*x[0] + (u>>8&nib16)*x[1]
		hi0 := (u>>4&nib16)*x[0] + (u>>12&nib16)*x[1]
		u = binary.LittleEndian.Uint64(blk[10:]) ^ 0x8080808080808080
		lo0 += (u&nib16)*x[2] + (u>>8&nib16)*x[3]
		hi0 += (u>>4&nib16)*x[2] + (u>>12&nib16)*x[3]
		u = binary.LittleEndian.Uint64(blk[18:]) ^ 0x8080808080808080
		lo1 := (u&nib16)*x[4] + (u>>8&nib16)*x[5]
		hi1 := (u>>4&nib16)*x[4] + (u>>12&nib16)*x[5]
		u = binary.LittleEndian.Uint64(blk[26:]) ^ 0x8080808080808080
		lo1 += (u&nib16)*x[6] + (u>>8&nib16)*x[7]
		hi1 += (u>>4&nib16)*x[6] + (u>>12&nib16)*x[7]
		isum := 16*(swarSum(hi0)+swarSum(hi1)) + swarSum(lo0) + swarSum(lo1) - 128*(hs[2*b]+hs[2*b+1])
		s += f16Table[uint16(blk[0])|uint16(blk[1])<<8] * d[b] * float32(isum)
	}
	return s
}

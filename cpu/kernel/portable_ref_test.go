package kernel

import (
	"encoding/binary"

	"github.com/cortiq/cortiq/tensor"
)

// The portable kernels as they were before they were unrolled for wasm
// (issue 16): the reference the unrolled ones must equal bit for bit
// (TestPortableBitIdentical).

func dotGenericRef(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16RowRef(row []byte, x []float32) float32 {
	row = row[:2*len(x)]
	var s0, s1, s2, s3 float32
	n8 := len(x) &^ 7
	for i := 0; i < n8; i += 8 {
		r := (*[16]byte)(row[2*i:])
		xi := (*[8]float32)(x[i:])
		s0 += f16Table[uint16(r[0])|uint16(r[1])<<8]*xi[0] + f16Table[uint16(r[8])|uint16(r[9])<<8]*xi[4]
		s1 += f16Table[uint16(r[2])|uint16(r[3])<<8]*xi[1] + f16Table[uint16(r[10])|uint16(r[11])<<8]*xi[5]
		s2 += f16Table[uint16(r[4])|uint16(r[5])<<8]*xi[2] + f16Table[uint16(r[12])|uint16(r[13])<<8]*xi[6]
		s3 += f16Table[uint16(r[6])|uint16(r[7])<<8]*xi[3] + f16Table[uint16(r[14])|uint16(r[15])<<8]*xi[7]
	}
	for i := n8; i < len(x); i++ {
		s0 += f16Table[binary.LittleEndian.Uint16(row[2*i:])] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotQ8_0RowRef(row []byte, x []float32) float32 {
	var s float32
	for b := 0; b < len(x)/32; b++ {
		blk := (*[34]byte)(row[34*b:])
		xb := (*[32]float32)(x[32*b:])
		q := (*[32]byte)(blk[2:])
		var s0, s1, s2, s3 float32
		for i := 0; i < 32; i += 4 {
			s0 += i8Table[q[i]] * xb[i]
			s1 += i8Table[q[i+1]] * xb[i+1]
			s2 += i8Table[q[i+2]] * xb[i+2]
			s3 += i8Table[q[i+3]] * xb[i+3]
		}
		s += f16Table[binary.LittleEndian.Uint16(blk[:])] * ((s0 + s1) + (s2 + s3))
	}
	return s
}

func dotQ4_0RowRef(row []byte, x []float32) float32 {
	var s float32
	for b := 0; b < len(x)/32; b++ {
		blk := (*[18]byte)(row[18*b:])
		xb := (*[32]float32)(x[32*b:])
		q := (*[16]byte)(blk[2:])
		var s0, s1, s2, s3 float32
		for i := 0; i < 16; i += 2 {
			q0, q1 := q[i], q[i+1]
			s0 += q4Table[q0&0xf] * xb[i]
			s1 += q4Table[q0>>4] * xb[i+16]
			s2 += q4Table[q1&0xf] * xb[i+1]
			s3 += q4Table[q1>>4] * xb[i+17]
		}
		s += f16Table[binary.LittleEndian.Uint16(blk[:])] * ((s0 + s1) + (s2 + s3))
	}
	return s
}

func dotQ4_KRowSumsRef(row []byte, x, xsum []float32) float32 {
	var s float32
	for b := 0; b < len(x)/256; b++ {
		blk := (*[144]byte)(row[144*b:])
		xb := (*[256]float32)(x[256*b:])
		xs := (*[8]float32)(xsum[8*b:])
		d := f16Table[binary.LittleEndian.Uint16(blk[0:])]
		dmin := f16Table[binary.LittleEndian.Uint16(blk[2:])]
		scales := blk[4:16]
		for j := 0; j < 4; j++ {
			sc1, m1 := tensor.Q4KScaleMin(2*j, scales)
			sc2, m2 := tensor.Q4KScaleMin(2*j+1, scales)
			q := (*[32]byte)(blk[16+32*j:])
			xl := (*[32]float32)(xb[64*j:])
			xh := (*[32]float32)(xb[64*j+32:])
			var l0, l1, h0, h1 float32
			for l := 0; l < 32; l += 2 {
				l0 += u4Table[q[l]&0xf] * xl[l]
				h0 += u4Table[q[l]>>4] * xh[l]
				l1 += u4Table[q[l+1]&0xf] * xl[l+1]
				h1 += u4Table[q[l+1]>>4] * xh[l+1]
			}
			s += d*float32(sc1)*(l0+l1) - dmin*float32(m1)*xs[2*j]
			s += d*float32(sc2)*(h0+h1) - dmin*float32(m2)*xs[2*j+1]
		}
	}
	return s
}

func dotQ6_KRowRef(row []byte, x []float32) float32 {
	var s float32
	for b := 0; b < len(x)/256; b++ {
		blk := (*[210]byte)(row[210*b:])
		xb := (*[256]float32)(x[256*b:])
		d := f16Table[binary.LittleEndian.Uint16(blk[208:])]
		for n := 0; n < 2; n++ {
			ql := (*[64]byte)(blk[64*n:])
			qh := (*[32]byte)(blk[128+32*n:])
			sc := (*[8]byte)(blk[192+8*n:])
			y := (*[128]float32)(xb[128*n:])
			// acc[k] sums sub-block k of this half: quarter k/2, l/16 = k%2.
			var acc [8]float32
			for h := 0; h < 2; h++ {
				var a0, a1, a2, a3 float32
				for l := 16 * h; l < 16*h+16; l++ {
					hb := qh[l]
					a0 += q6Table[ql[l]&0xf|(hb&3)<<4] * y[l]
					a1 += q6Table[ql[l+32]&0xf|(hb>>2&3)<<4] * y[l+32]
					a2 += q6Table[ql[l]>>4|(hb>>4&3)<<4] * y[l+64]
					a3 += q6Table[ql[l+32]>>4|(hb>>6)<<4] * y[l+96]
				}
				acc[h], acc[h+2], acc[h+4], acc[h+6] = a0, a1, a2, a3
			}
			for k := range 8 {
				s += d * float32(int8(sc[k])) * acc[k]
			}
		}
	}
	return s
}

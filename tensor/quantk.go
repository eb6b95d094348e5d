package tensor

import (
	"encoding/binary"
	"math"
)

// quantizeQ4_KBlock encodes one q4_K super-block with a plain min/max scale
// choice per sub-block (llama.cpp searches for better scales; any choice
// decodes with the same formula).
func quantizeQ4_KBlock(dst *[144]byte, x *[256]float32) {
	var scale, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		lo, hi := float32(0), float32(0)
		for _, v := range x[32*j : 32*j+32] {
			lo, hi = min(lo, v), max(hi, v)
		}
		scale[j] = (hi - lo) / 15
		mins[j] = -lo
		maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, mins[j])
	}
	d := F16ToF32(F32ToF16(maxScale / 63))
	dmin := F16ToF32(F32ToF16(maxMin / 63))
	var sc, m [8]uint8
	for j := range 8 {
		if d > 0 {
			sc[j] = uint8(min(63, math.Round(float64(scale[j]/d))))
		}
		if dmin > 0 {
			m[j] = uint8(min(63, math.Round(float64(mins[j]/dmin))))
		}
	}
	binary.LittleEndian.PutUint16(dst[0:], F32ToF16(d))
	binary.LittleEndian.PutUint16(dst[2:], F32ToF16(dmin))
	s := dst[4:16]
	clear(s)
	for j := range 8 {
		if j < 4 {
			s[j] = sc[j]
			s[j+4] = m[j]
		} else {
			s[j+4] = sc[j]&0xf | (m[j]&0xf)<<4
			s[j-4] |= (sc[j] >> 4) << 6
			s[j] |= (m[j] >> 4) << 6
		}
	}
	qs := dst[16:144]
	for j := range 8 {
		step := d * float32(sc[j])
		off := dmin * float32(m[j])
		for l := range 32 {
			var q int
			if step > 0 {
				q = int(math.Round(float64((x[32*j+l] + off) / step)))
				q = max(0, min(15, q))
			}
			i := 32*(j/2) + l
			if j%2 == 0 {
				qs[i] = qs[i]&0xf0 | byte(q)
			} else {
				qs[i] = qs[i]&0x0f | byte(q)<<4
			}
		}
	}
}

// quantizeQ6_KBlock encodes one q6_K super-block with a plain absmax scale
// per sub-block of 16.
func quantizeQ6_KBlock(dst *[210]byte, x *[256]float32) {
	var scale [16]float32
	var maxScale float32
	for i := range 16 {
		var amax float32
		for _, v := range x[16*i : 16*i+16] {
			amax = max(amax, abs32(v))
		}
		scale[i] = amax / 31
		maxScale = max(maxScale, scale[i])
	}
	d := F16ToF32(F32ToF16(maxScale / 127))
	binary.LittleEndian.PutUint16(dst[208:], F32ToF16(d))
	var sc [16]int8
	for i := range 16 {
		if d > 0 {
			sc[i] = int8(min(127, math.Round(float64(scale[i]/d))))
		}
		dst[192+i] = byte(sc[i])
	}
	var q [256]uint8
	for p := range 256 {
		step := d * float32(sc[p/16])
		v := 0
		if step != 0 {
			v = int(math.Round(float64(x[p] / step)))
			v = max(-32, min(31, v))
		}
		q[p] = uint8(v + 32)
	}
	for n := 0; n < 2; n++ {
		ql := dst[64*n : 64*n+64]
		qh := dst[128+32*n : 128+32*n+32]
		y := q[128*n : 128*n+128]
		for l := range 32 {
			q1, q2, q3, q4 := y[l], y[l+32], y[l+64], y[l+96]
			ql[l] = q1&0xf | (q3&0xf)<<4
			ql[l+32] = q2&0xf | (q4&0xf)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}

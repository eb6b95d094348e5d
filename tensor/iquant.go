package tensor

import "encoding/binary"

// Decoders of the IQ types: groups of 8 (or 4) elements are indices into
// the code books of iqgrids_gen.go, with sign bits and per-32 scales. The
// float32 operation order is ggml's (see lowbit.go).

// ksignsIQ2XS is ggml's ksigns_iq2xs: seven sign bits plus an eighth that
// makes the count of negative signs even.
var ksignsIQ2XS = func() (t [128]uint8) {
	for i := range t {
		p := uint8(0)
		for v := i; v != 0; v >>= 1 {
			p ^= uint8(v & 1)
		}
		t[i] = uint8(i) | p<<7
	}
	return t
}()

func sign8(signs uint8, j int) float32 {
	if signs>>j&1 != 0 {
		return -1
	}
	return 1
}

func gridByte(g uint64, j int) float32 { return float32(uint8(g >> (8 * j))) }

// iq2_xxs: f16 d, then per 32: four grid bytes and a uint32 of four 7-bit
// sign indices plus a 4-bit scale. x = d·(0.5+s)·0.25·grid·sign.
func decodeIQ2_XXS(y []float32, b []byte) {
	d := f16At(b, 0)
	for ib := range 8 {
		q := b[2+8*ib : 2+8*ib+8]
		aux1 := binary.LittleEndian.Uint32(q[4:])
		db := float32(d*(0.5+float32(aux1>>28))) * 0.25
		for l := range 4 {
			g := iq2xxsGrid[q[l]]
			s := ksignsIQ2XS[aux1>>(7*l)&127]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = float32(db*gridByte(g, j)) * sign8(s, j)
			}
		}
	}
}

// iq2_xs: f16 d, 32 uint16 (9-bit grid index, 7-bit sign index), 8 bytes of
// two 4-bit scales.
func decodeIQ2_XS(y []float32, b []byte) {
	d := f16At(b, 0)
	scales := b[66:74]
	for ib := range 8 {
		db := [2]float32{
			float32(d*(0.5+float32(scales[ib]&0xf))) * 0.25,
			float32(d*(0.5+float32(scales[ib]>>4))) * 0.25,
		}
		for l := range 4 {
			v := binary.LittleEndian.Uint16(b[2+2*(4*ib+l):])
			g := iq2xsGrid[v&511]
			s := ksignsIQ2XS[v>>9]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = float32(db[l/2]*gridByte(g, j)) * sign8(s, j)
			}
		}
	}
}

// iq2_s: f16 d, 32 bytes of grid index low bits, 32 bytes of signs, 8 bytes
// of index high bit pairs, 8 bytes of two 4-bit scales.
func decodeIQ2_S(y []float32, b []byte) {
	d := f16At(b, 0)
	qs, signs, qh, scales := b[2:34], b[34:66], b[66:74], b[74:82]
	for ib := range 8 {
		db := [2]float32{
			float32(d*(0.5+float32(scales[ib]&0xf))) * 0.25,
			float32(d*(0.5+float32(scales[ib]>>4))) * 0.25,
		}
		for l := range 4 {
			idx := uint16(qs[4*ib+l]) | uint16(qh[ib])<<(8-2*l)&0x300
			g := iq2sGrid[idx]
			s := signs[4*ib+l]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = float32(db[l/2]*gridByte(g, j)) * sign8(s, j)
			}
		}
	}
}

// iq3_xxs: f16 d, 64 grid bytes (groups of 4), then per 32 a uint32 of four
// 7-bit sign indices and a 4-bit scale. x = d·(0.5+s)·0.5·grid·sign.
func decodeIQ3_XXS(y []float32, b []byte) {
	d := f16At(b, 0)
	qs, ss := b[2:66], b[66:98]
	for ib := range 8 {
		aux := binary.LittleEndian.Uint32(ss[4*ib:])
		db := float32(d*(0.5+float32(aux>>28))) * 0.5
		for l := range 4 {
			s := ksignsIQ2XS[aux>>(7*l)&127]
			g1 := uint64(iq3xxsGrid[qs[8*ib+2*l]])
			g2 := uint64(iq3xxsGrid[qs[8*ib+2*l+1]])
			out := y[32*ib+8*l:]
			for j := range 4 {
				out[j] = float32(db*gridByte(g1, j)) * sign8(s, j)
				out[j+4] = float32(db*gridByte(g2, j)) * sign8(s, j+4)
			}
		}
	}
}

// iq3_s: f16 d, 64 bytes of grid index low bits, 8 bytes of index high
// bits, 32 bytes of signs, 4 bytes of two 4-bit scales. x = d·(1+2s)·grid·sign.
func decodeIQ3_S(y []float32, b []byte) {
	d := f16At(b, 0)
	qs, qh, signs, scales := b[2:66], b[66:74], b[74:106], b[106:110]
	for ib := range 8 {
		db := d * float32(1+2*int32(scales[ib/2]>>(4*(ib%2))&0xf))
		for l := range 4 {
			k := 8*ib + 2*l
			i1 := uint16(qs[k]) | uint16(qh[k/8]>>(k%8)&1)<<8
			i2 := uint16(qs[k+1]) | uint16(qh[(k+1)/8]>>((k+1)%8)&1)<<8
			g1, g2 := uint64(iq3sGrid[i1]), uint64(iq3sGrid[i2])
			s := signs[4*ib+l]
			out := y[32*ib+8*l:]
			for j := range 4 {
				out[j] = float32(db*gridByte(g1, j)) * sign8(s, j)
				out[j+4] = float32(db*gridByte(g2, j)) * sign8(s, j+4)
			}
		}
	}
}

// iq1Delta is ggml's IQ1S_DELTA (and IQ1M_DELTA).
const iq1Delta = 0.125

func gridTrit(g uint64, j int) float32 { return float32(int8(uint8(g >> (8 * j)))) }

// iq1_s: f16 d, 32 bytes of grid index low bits, 8 uint16 (four 3-bit index
// high parts, a 3-bit scale, the delta's sign). x = d·(2s+1)·(grid±delta).
func decodeIQ1_S(y []float32, b []byte) {
	d := f16At(b, 0)
	qs := b[2:34]
	for ib := range 8 {
		qh := binary.LittleEndian.Uint16(b[34+2*ib:])
		dl := d * float32(2*int32(qh>>12&7)+1)
		delta := float32(iq1Delta)
		if qh&0x8000 != 0 {
			delta = -iq1Delta
		}
		for l := range 4 {
			g := iq1sGrid[uint16(qs[4*ib+l])|(qh>>(3*l)&7)<<8]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = dl * float32(gridTrit(g, j)+delta)
			}
		}
	}
}

// iq1_m: 32 bytes of grid index low bits, 16 bytes of (3-bit index high
// part, delta sign) nibbles, 8 bytes of 3-bit scales whose four top nibbles
// are the f16 super-block scale.
func decodeIQ1_M(y []float32, b []byte) {
	qs, qh, sb := b[0:32], b[32:48], b[48:56]
	var sc [4]uint16
	for k := range sc {
		sc[k] = binary.LittleEndian.Uint16(sb[2*k:])
	}
	d := F16ToF32(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000)
	for ib := range 8 {
		s := sc[ib/2] >> (6 * (ib % 2))
		dl := [2]float32{d * float32(2*int32(s&7)+1), d * float32(2*int32(s>>3&7)+1)}
		for l := range 4 {
			h := qh[2*ib+l/2] >> (4 * (l % 2))
			idx := uint16(qs[4*ib+l]) | uint16(h&7)<<8
			delta := float32(iq1Delta)
			if h&8 != 0 {
				delta = -iq1Delta
			}
			g := iq1sGrid[idx]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = dl[l/2] * float32(gridTrit(g, j)+delta)
			}
		}
	}
}

// GridBytes is the code book an IQ codec's groups index, one byte per
// element (entries of 8 bytes; iq3_xxs and iq3_s of 4), little endian as
// ggml's tables: iq1_m shares iq1_s's. Nil for other codecs. Device
// backends upload it beside the weights.
func GridBytes(c Codec) []byte {
	var g []uint64
	switch c {
	case IQ2_XXS:
		g = iq2xxsGrid[:]
	case IQ2_XS:
		g = iq2xsGrid[:]
	case IQ2_S:
		g = iq2sGrid[:]
	case IQ1_S, IQ1_M:
		g = iq1sGrid[:]
	case IQ3_XXS, IQ3_S:
		t := iq3xxsGrid[:]
		if c == IQ3_S {
			t = iq3sGrid[:]
		}
		out := make([]byte, 4*len(t))
		for i, v := range t {
			binary.LittleEndian.PutUint32(out[4*i:], v)
		}
		return out
	default:
		return nil
	}
	out := make([]byte, 8*len(g))
	for i, v := range g {
		binary.LittleEndian.PutUint64(out[8*i:], v)
	}
	return out
}

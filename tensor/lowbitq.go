package tensor

import (
	"encoding/binary"
	"math"
	"sort"
	"sync"
)

// Encoders of the GGUF codecs of lowbit.go and iquant.go. They are simple
// round-to-nearest (legacy, K and FP4 types) and nearest-grid-point (IQ
// types) choices: valid blocks that decode with ggml's formulas, not
// llama.cpp's searched (or importance-weighted) bytes. What the engine must
// match exactly is the decode; these exist so that synth and the tests can
// write every type.

// blockEncoders encodes one block (dst BlockBytes, src BlockLen values).
var blockEncoders = [NumCodecs]func(dst []byte, src []float32){
	Q4_1:    encodeQ4_1,
	Q5_0:    encodeQ5_0,
	Q5_1:    encodeQ5_1,
	Q2_K:    encodeQ2_K,
	Q3_K:    encodeQ3_K,
	Q5_K:    encodeQ5_K,
	IQ4_NL:  encodeIQ4_NL,
	IQ4_XS:  encodeIQ4_XS,
	IQ3_XXS: encodeIQ3_XXS,
	IQ3_S:   encodeIQ3_S,
	IQ2_XXS: encodeIQ2_XXS,
	IQ2_XS:  encodeIQ2_XS,
	IQ2_S:   encodeIQ2_S,
	IQ1_S:   encodeIQ1_S,
	IQ1_M:   encodeIQ1_M,
	TQ1_0:   encodeTQ1_0,
	TQ2_0:   encodeTQ2_0,
	MXFP4:   encodeMXFP4,
}

func putF16(b []byte, off int, v float32) float32 {
	h := F32ToF16(v)
	binary.LittleEndian.PutUint16(b[off:], h)
	return F16ToF32(h)
}

func roundClamp(v float32, lo, hi int) int {
	if v != v {
		return lo
	}
	return max(lo, min(hi, int(math.Round(float64(v)))))
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return
}

func amaxOf(x []float32) float32 {
	var a float32
	for _, v := range x {
		a = max(a, abs32(v))
	}
	return a
}

// signedMax is the element of largest magnitude, with its sign.
func signedMax(x []float32) float32 {
	var a, m float32
	for _, v := range x {
		if abs32(v) > a {
			a, m = abs32(v), v
		}
	}
	return m
}

func div(a, b float32) float32 {
	if b == 0 {
		return 0
	}
	return a / b
}

// encodeAffine writes n-bit codes q = round((x-m)/d) of a q4_1/q5_1 block.
func encodeAffine(dst []byte, x []float32, bits int) {
	lo, hi := minMax(x)
	top := 1<<bits - 1
	d := putF16(dst, 0, (hi-lo)/float32(top))
	m := putF16(dst, 2, lo)
	var q [32]int
	for i, v := range x {
		q[i] = roundClamp(div(v-m, d), 0, top)
	}
	packNibbles(dst, 4, bits, q[:])
}

// packNibbles writes 32 codes at off: for 5 bits, first the 32 high bits.
func packNibbles(dst []byte, off, bits int, q []int) {
	if bits == 5 {
		var qh uint32
		for i, v := range q {
			qh |= uint32(v>>4&1) << i
		}
		binary.LittleEndian.PutUint32(dst[off:], qh)
		off += 4
	}
	for j := range 16 {
		dst[off+j] = byte(q[j]&0xf) | byte(q[j+16]&0xf)<<4
	}
}

func encodeQ4_1(dst []byte, x []float32) { encodeAffine(dst, x, 4) }
func encodeQ5_1(dst []byte, x []float32) { encodeAffine(dst, x, 5) }

func encodeQ5_0(dst []byte, x []float32) {
	d := putF16(dst, 0, signedMax(x)/-16)
	var q [32]int
	for i, v := range x {
		q[i] = roundClamp(div(v, d), -16, 15) + 16
	}
	packNibbles(dst, 2, 5, q[:])
}

// encodeQ2_K: per 16, scale and min from the range (4 bits each).
func encodeQ2_K(dst []byte, x []float32) {
	var sc, mn [16]float32
	var msc, mmn float32
	for i := range 16 {
		lo, hi := minMax(x[16*i : 16*i+16])
		lo = min(lo, 0)
		sc[i], mn[i] = (hi-lo)/3, -lo
		msc, mmn = max(msc, sc[i]), max(mmn, mn[i])
	}
	d := putF16(dst, 80, msc/15)
	dmin := putF16(dst, 82, mmn/15)
	clear(dst[:80])
	for i := range 16 {
		ls := roundClamp(div(sc[i], d), 0, 15)
		lm := roundClamp(div(mn[i], dmin), 0, 15)
		dst[i] = byte(ls) | byte(lm)<<4
		dl, ml := d*float32(ls), dmin*float32(lm)
		for l := range 16 {
			p := 16*i + l
			q := roundClamp(div(x[p]+ml, dl), 0, 3)
			// element p: chunk p/128, plane (p%128)/32, byte p%32
			dst[16+32*(p/128)+p%32] |= byte(q) << (2 * (p % 128 / 32))
		}
	}
}

// encodeQ3_K: per 16, a signed 6-bit scale; codes -4..3.
func encodeQ3_K(dst []byte, x []float32) {
	var sc [16]float32
	var msc float32
	for i := range 16 {
		sc[i] = signedMax(x[16*i:16*i+16]) / -4
		msc = max(msc, abs32(sc[i]))
	}
	d := putF16(dst, 108, msc/32)
	clear(dst[:108])
	for i := range 16 {
		ls := roundClamp(div(sc[i], d), -32, 31)
		u := ls + 32
		dst[96+i%8] |= byte(u&0xf) << (4 * (i / 8))
		dst[104+i%4] |= byte(u>>4&3) << (2 * (i / 4))
		dl := d * float32(ls)
		for l := range 16 {
			p := 16*i + l
			q := roundClamp(div(x[p], dl), -4, 3) + 4
			dst[32+32*(p/128)+p%32] |= byte(q&3) << (2 * (p % 128 / 32))
			if q >= 4 {
				dst[p%32] |= 1 << (p / 32)
			}
		}
	}
}

// encodeQ5_K: q4_K's scale choice with 5-bit codes.
func encodeQ5_K(dst []byte, x []float32) {
	var scale, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		lo, hi := minMax(x[32*j : 32*j+32])
		lo = min(lo, 0)
		scale[j], mins[j] = (hi-lo)/31, -lo
		maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, mins[j])
	}
	d := putF16(dst, 0, maxScale/63)
	dmin := putF16(dst, 2, maxMin/63)
	clear(dst[4:])
	s := dst[4:16]
	for j := range 8 {
		sc := byte(roundClamp(div(scale[j], d), 0, 63))
		m := byte(roundClamp(div(mins[j], dmin), 0, 63))
		if j < 4 {
			s[j] |= sc
			s[j+4] |= m
		} else {
			s[j+4] = sc&0xf | (m&0xf)<<4
			s[j-4] |= (sc >> 4) << 6
			s[j] |= (m >> 4) << 6
		}
		step, off := d*float32(sc), dmin*float32(m)
		for l := range 32 {
			q := roundClamp(div(x[32*j+l]+off, step), 0, 31)
			i := 32*(j/2) + l
			dst[48+i] |= byte(q&0xf) << (4 * (j % 2))
			if q >= 16 {
				dst[16+l] |= 1 << j
			}
		}
	}
}

// nearest is the index of the code-book value closest to v.
func nearest(book []int8, v float32) int {
	best, bi := float32(math.Inf(1)), 0
	for i, c := range book {
		if e := abs32(float32(c) - v); e < best {
			best, bi = e, i
		}
	}
	return bi
}

func encodeIQ4_NL(dst []byte, x []float32) {
	d := putF16(dst, 0, signedMax(x)/-127)
	for j := range 16 {
		lo := nearest(iq4nlValues[:], div(x[j], d))
		hi := nearest(iq4nlValues[:], div(x[j+16], d))
		dst[2+j] = byte(lo) | byte(hi)<<4
	}
}

func encodeIQ4_XS(dst []byte, x []float32) {
	var sc [8]float32
	var msc float32
	for ib := range 8 {
		sc[ib] = signedMax(x[32*ib:32*ib+32]) / -127
		msc = max(msc, abs32(sc[ib]))
	}
	d := putF16(dst, 0, msc/32)
	clear(dst[2:])
	var sh uint16
	for ib := range 8 {
		ls := roundClamp(div(sc[ib], d), -32, 31) + 32
		dst[4+ib/2] |= byte(ls&0xf) << (4 * (ib % 2))
		sh |= uint16(ls>>4&3) << (2 * ib)
		dl := d * float32(ls-32)
		for j := range 16 {
			lo := nearest(iq4nlValues[:], div(x[32*ib+j], dl))
			hi := nearest(iq4nlValues[:], div(x[32*ib+16+j], dl))
			dst[8+16*ib+j] = byte(lo) | byte(hi)<<4
		}
	}
	binary.LittleEndian.PutUint16(dst[2:], sh)
}

// codeBook is an IQ grid prepared for nearest-entry search: each entry is
// two halves of n/2 elements, each half one of the patterns of n/2 levels
// (levels: the distinct element values), so a search scores every half
// pattern once and every entry with two lookups.
type codeBook struct {
	n      int
	levels []float32   // distinct element values, ascending
	pats   [][]float32 // every half pattern: n/2 level values
	halves [][2]uint16 // each entry's (low, high) half pattern
}

// maxPats bounds the half patterns (3 levels of 4, or 8 levels of 2).
const maxPats = 81

// search is the entry closest to v once offset by delta: the g minimizing
// Σ(g+delta-v)², and that error.
func (cb *codeBook) search(v []float32, delta float32) (int, float32) {
	h := cb.n / 2
	var lo, hi [maxPats]float32
	for p, pat := range cb.pats {
		var el, eh float32
		for k, l := range pat {
			r := l + delta - v[k]
			el += r * r
			r = l + delta - v[h+k]
			eh += r * r
		}
		lo[p], hi[p] = el, eh
	}
	best, bi := float32(math.Inf(1)), 0
	for i, hv := range cb.halves {
		if e := lo[hv[0]] + hi[hv[1]]; e < best {
			best, bi = e, i
		}
	}
	return bi, best
}

// newCodeBook prepares a byte-per-element grid.
func newCodeBook[T uint32 | uint64](grid []T, n int, signed bool) *codeBook {
	cb := &codeBook{n: n}
	val := func(g T, j int) float32 {
		b := uint8(uint64(g) >> (8 * j))
		if signed {
			return float32(int8(b))
		}
		return float32(b)
	}
	seen := map[float32]bool{}
	for _, g := range grid {
		for j := range n {
			if v := val(g, j); !seen[v] {
				seen[v] = true
				cb.levels = append(cb.levels, v)
			}
		}
	}
	sort.Slice(cb.levels, func(i, j int) bool { return cb.levels[i] < cb.levels[j] })
	h, nl := n/2, len(cb.levels)
	np := 1
	for range h {
		np *= nl
	}
	if np > maxPats {
		panic("tensor: code book halves exceed maxPats") // a table defect
	}
	for p := range np {
		pat := make([]float32, h)
		for k, q := 0, p; k < h; k, q = k+1, q/nl {
			pat[k] = cb.levels[q%nl]
		}
		cb.pats = append(cb.pats, pat)
	}
	index := func(g T, from int) uint16 {
		p, mul := 0, 1
		for k := range h {
			p += sort.Search(nl, func(i int) bool { return cb.levels[i] >= val(g, from+k) }) * mul
			mul *= nl
		}
		return uint16(p)
	}
	for _, g := range grid {
		cb.halves = append(cb.halves, [2]uint16{index(g, 0), index(g, h)})
	}
	return cb
}

// The code books, built on first use by an encoder.
var codeBooks = sync.OnceValue(func() (g struct{ iq2xxs, iq2xs, iq2s, iq3xxs, iq3s, iq1s *codeBook }) {
	g.iq2xxs = newCodeBook(iq2xxsGrid[:], 8, false)
	g.iq2xs = newCodeBook(iq2xsGrid[:], 8, false)
	g.iq2s = newCodeBook(iq2sGrid[:], 8, false)
	g.iq3xxs = newCodeBook(iq3xxsGrid[:], 4, false)
	g.iq3s = newCodeBook(iq3sGrid[:], 4, false)
	g.iq1s = newCodeBook(iq1sGrid[:], 8, true)
	return g
})

// signsOf returns the magnitudes of a group of 8 and its sign bits (bit j
// set: element j negative). With even, a group with an odd count of
// negatives flips the sign of its smallest element (the IQ2_XXS, IQ2_XS and
// IQ3_XXS sign code books hold even counts only).
func signsOf(x []float32, even bool) (mag [8]float32, bits uint8) {
	small := 0
	for j, v := range x[:8] {
		mag[j] = abs32(v)
		if v < 0 {
			bits |= 1 << j
		}
		if mag[j] < mag[small] {
			small = j
		}
	}
	if even {
		p := 0
		for b := bits; b != 0; b &= b - 1 {
			p++
		}
		if p%2 == 1 {
			bits ^= 1 << small
		}
	}
	return
}

// iqScale picks the 4-bit scale s of a 32-group for db = d·(0.5+s)·k.
func iqScale(want, d, k float32) int {
	return roundClamp(div(want, d*k)-0.5, 0, 15)
}

func encodeIQ2_XXS(dst []byte, x []float32) {
	var want [8]float32
	var mw float32
	for ib := range 8 {
		want[ib] = amaxOf(x[32*ib:32*ib+32]) / 43
		mw = max(mw, want[ib])
	}
	d := putF16(dst, 0, mw/(15.5*0.25))
	for ib := range 8 {
		s := iqScale(want[ib], d, 0.25)
		db := float32(d*(0.5+float32(s))) * 0.25
		q := dst[2+8*ib : 2+8*ib+8]
		aux := uint32(s) << 28
		for l := range 4 {
			mag, bits := signsOf(x[32*ib+8*l:], true)
			for j := range mag {
				mag[j] = div(mag[j], db)
			}
			g, _ := codeBooks().iq2xxs.search(mag[:], 0)
			q[l] = byte(g)
			aux |= uint32(bits&127) << (7 * l)
		}
		binary.LittleEndian.PutUint32(q[4:], aux)
	}
}

// iq2Scales picks the two 4-bit scales (one per 16) of each 32-group.
func iq2Scales(dst []byte, x []float32, top float32) (d float32, s [16]int) {
	var want [16]float32
	var mw float32
	for i := range 16 {
		want[i] = amaxOf(x[16*i:16*i+16]) / top
		mw = max(mw, want[i])
	}
	d = putF16(dst, 0, mw/(15.5*0.25))
	for i := range 16 {
		s[i] = iqScale(want[i], d, 0.25)
	}
	return d, s
}

func encodeIQ2_XS(dst []byte, x []float32) {
	d, s := iq2Scales(dst, x, 43)
	for ib := range 8 {
		dst[66+ib] = byte(s[2*ib]) | byte(s[2*ib+1])<<4
		for l := range 4 {
			db := float32(d*(0.5+float32(s[2*ib+l/2]))) * 0.25
			mag, bits := signsOf(x[32*ib+8*l:], true)
			for j := range mag {
				mag[j] = div(mag[j], db)
			}
			g, _ := codeBooks().iq2xs.search(mag[:], 0)
			binary.LittleEndian.PutUint16(dst[2+2*(4*ib+l):], uint16(g)|uint16(bits&127)<<9)
		}
	}
}

func encodeIQ2_S(dst []byte, x []float32) {
	d, s := iq2Scales(dst, x, 43)
	clear(dst[66:74])
	for ib := range 8 {
		dst[74+ib] = byte(s[2*ib]) | byte(s[2*ib+1])<<4
		for l := range 4 {
			db := float32(d*(0.5+float32(s[2*ib+l/2]))) * 0.25
			mag, bits := signsOf(x[32*ib+8*l:], false)
			for j := range mag {
				mag[j] = div(mag[j], db)
			}
			g, _ := codeBooks().iq2s.search(mag[:], 0)
			dst[2+4*ib+l] = byte(g)
			dst[34+4*ib+l] = bits
			dst[66+ib] |= byte(g>>8&3) << (2 * l)
		}
	}
}

func encodeIQ3_XXS(dst []byte, x []float32) {
	var want [8]float32
	var mw float32
	for ib := range 8 {
		want[ib] = amaxOf(x[32*ib:32*ib+32]) / 62
		mw = max(mw, want[ib])
	}
	d := putF16(dst, 0, mw/(15.5*0.5))
	for ib := range 8 {
		s := iqScale(want[ib], d, 0.5)
		db := float32(d*(0.5+float32(s))) * 0.5
		aux := uint32(s) << 28
		for l := range 4 {
			mag, bits := signsOf(x[32*ib+8*l:], true)
			for j := range mag {
				mag[j] = div(mag[j], db)
			}
			g1, _ := codeBooks().iq3xxs.search(mag[:4], 0)
			g2, _ := codeBooks().iq3xxs.search(mag[4:], 0)
			dst[2+8*ib+2*l], dst[2+8*ib+2*l+1] = byte(g1), byte(g2)
			aux |= uint32(bits&127) << (7 * l)
		}
		binary.LittleEndian.PutUint32(dst[66+4*ib:], aux)
	}
}

func encodeIQ3_S(dst []byte, x []float32) {
	var want [8]float32
	var mw float32
	for ib := range 8 {
		want[ib] = amaxOf(x[32*ib:32*ib+32]) / 15
		mw = max(mw, want[ib])
	}
	d := putF16(dst, 0, mw/31)
	clear(dst[66:])
	for ib := range 8 {
		s := roundClamp((div(want[ib], d)-1)/2, 0, 15)
		dst[106+ib/2] |= byte(s) << (4 * (ib % 2))
		db := d * float32(1+2*s)
		for l := range 4 {
			mag, bits := signsOf(x[32*ib+8*l:], false)
			for j := range mag {
				mag[j] = div(mag[j], db)
			}
			dst[74+4*ib+l] = bits
			for h := range 2 {
				k := 8*ib + 2*l + h
				g, _ := codeBooks().iq3s.search(mag[4*h:4*h+4], 0)
				dst[2+k] = byte(g)
				dst[66+k/8] |= byte(g>>8&1) << (k % 8)
			}
		}
	}
}

// iq1Group finds the grid entry and delta sign for 8 values (already
// divided by the scale).
func iq1Group(v []float32) (idx int, neg bool) {
	ip, ep := codeBooks().iq1s.search(v, iq1Delta)
	in, en := codeBooks().iq1s.search(v, -iq1Delta)
	if en < ep {
		return in, true
	}
	return ip, false
}

func encodeIQ1_S(dst []byte, x []float32) {
	var want [8]float32
	var mw float32
	for ib := range 8 {
		want[ib] = amaxOf(x[32*ib:32*ib+32]) / 1.125
		mw = max(mw, want[ib])
	}
	d := putF16(dst, 0, mw/15)
	for ib := range 8 {
		s := roundClamp((div(want[ib], d)-1)/2, 0, 7)
		dl := d * float32(2*s+1)
		qh := uint16(s) << 12
		var v [32]float32
		for i := range v {
			v[i] = div(x[32*ib+i], dl)
		}
		// One delta sign per 32: the one of the first group's best fit.
		_, neg := iq1Group(v[:8])
		delta := float32(iq1Delta)
		if neg {
			delta = -iq1Delta
			qh |= 0x8000
		}
		for l := range 4 {
			g, _ := codeBooks().iq1s.search(v[8*l:8*l+8], delta)
			dst[2+4*ib+l] = byte(g)
			qh |= uint16(g>>8&7) << (3 * l)
		}
		binary.LittleEndian.PutUint16(dst[34+2*ib:], qh)
	}
}

func encodeIQ1_M(dst []byte, x []float32) {
	var want [16]float32
	var mw float32
	for i := range 16 {
		want[i] = amaxOf(x[16*i:16*i+16]) / 1.125
		mw = max(mw, want[i])
	}
	h := F32ToF16(mw / 15)
	d := F16ToF32(h)
	var sc [4]uint16
	clear(dst[32:48])
	for i := range 16 {
		s := roundClamp((div(want[i], d)-1)/2, 0, 7)
		sc[i/4] |= uint16(s) << (3 * (i % 4))
		dl := d * float32(2*s+1)
		for hh := range 2 {
			var v [8]float32
			for j := range v {
				v[j] = div(x[16*i+8*hh+j], dl)
			}
			g, neg := iq1Group(v[:])
			l := 2*i + hh // group of 8 in the super-block
			dst[l] = byte(g)
			nib := byte(g >> 8 & 7)
			if neg {
				nib |= 8
			}
			dst[32+l/2] |= nib << (4 * (l % 2))
		}
	}
	for k := range sc {
		sc[k] |= (h >> (4 * k) & 0xf) << 12
		binary.LittleEndian.PutUint16(dst[48+2*k:], sc[k])
	}
}

// encodeTQ1_0: ternary codes, five (or four) base-3 digits per byte stored
// as ceil(v·256/243) so that (uint8(q·3^n)·3)>>8 recovers digit n.
func encodeTQ1_0(dst []byte, x []float32) {
	d := putF16(dst, 52, amaxOf(x))
	t := func(p int) int { return roundClamp(div(x[p], d), -1, 1) + 1 }
	pack := func(digits []int) byte {
		v := 0
		for _, q := range digits {
			v = 3*v + q
		}
		for range 5 - len(digits) {
			v *= 3
		}
		return byte((v*256 + 242) / 243)
	}
	for m := range 32 {
		dst[m] = pack([]int{t(m), t(32 + m), t(64 + m), t(96 + m), t(128 + m)})
	}
	for m := range 16 {
		dst[32+m] = pack([]int{t(160 + m), t(176 + m), t(192 + m), t(208 + m), t(224 + m)})
	}
	for j := range 4 {
		dst[48+j] = pack([]int{t(240 + j), t(244 + j), t(248 + j), t(252 + j)})
	}
}

func encodeTQ2_0(dst []byte, x []float32) {
	d := putF16(dst, 64, amaxOf(x))
	clear(dst[:64])
	for p := range 256 {
		q := roundClamp(div(x[p], d), -1, 1) + 1
		dst[32*(p/128)+p%32] |= byte(q) << (2 * (p % 128 / 32))
	}
}

// encodeMXFP4: the smallest power-of-two scale that keeps the block's
// largest element within the code book (±6 in e2m1, 12 doubled), then the
// nearest code per element.
func encodeMXFP4(dst []byte, x []float32) {
	a := amaxOf(x)
	e := 0
	if a > 0 {
		// d = 2^(e-128) with a/d <= 12.
		e = max(0, min(254, int(math.Ceil(math.Log2(float64(a)/12)))+128))
	}
	dst[0] = byte(e)
	d := E8M0Half(byte(e))
	for j := range 16 {
		lo := nearest(mxfp4Values[:], div(x[j], d))
		hi := nearest(mxfp4Values[:], div(x[j+16], d))
		dst[1+j] = byte(lo) | byte(hi)<<4
	}
}

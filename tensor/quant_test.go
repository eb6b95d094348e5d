package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func randVec(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * scale
	}
	return v
}

func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []Codec{F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K} {
		for _, n := range []int{256, 512, 4096} {
			x := randVec(r, n, 0.7)
			x[3] = 0 // exact zeros must stay (near) zero
			rb, _ := c.RowBytes(n)
			enc := make([]byte, rb)
			if err := Quantize(enc, c, x); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, n)
			if err := Dequantize(y, c, enc); err != nil {
				t.Fatal(err)
			}
			bl := c.BlockLen()
			for b := 0; b < n; b += max(bl, 32) {
				blk := max(bl, 32)
				var amax float64
				for _, v := range x[b : b+blk] {
					amax = max(amax, math.Abs(float64(v)))
				}
				var bound float64
				switch c {
				case F32:
					bound = 0
				case F16:
					bound = amax * 0x1p-11
				case BF16:
					bound = amax * 0x1p-8
				case Q8_0:
					bound = amax/127/2 + amax*0x1p-10
				case Q4_0:
					bound = amax/8 + amax*0x1p-10 // clamp at 15 can cost a whole step
				case Q4_K:
					bound = 0.25 * amax // coarse: 4 bits over (max-min) plus 6-bit scales
				case Q6_K:
					bound = 0.06 * amax
				}
				for i := b; i < b+blk; i++ {
					if e := math.Abs(float64(x[i] - y[i])); e > bound+1e-30 {
						t.Fatalf("%s n=%d: x[%d]=%g decoded %g, error %g > %g", c, n, i, x[i], y[i], e, bound)
					}
				}
			}
		}
	}
}

func TestQuantizeKnownBlocks(t *testing.T) {
	var x [32]float32
	for i := range x {
		x[i] = float32(i - 16)
	}
	// q4_0: largest magnitude is -16 -> d = 2; q = min(15, trunc(x/2+8.5)).
	var b4 [18]byte
	QuantizeQ4_0Block(&b4, &x)
	if d := binary.LittleEndian.Uint16(b4[:]); d != F32ToF16(2) {
		t.Fatalf("q4_0 d = %#04x", d)
	}
	for i := range 32 {
		want := min(15, int(float32(i-16)/2+8.5))
		var got int
		if i < 16 {
			got = int(b4[2+i] & 0xf)
		} else {
			got = int(b4[2+i-16] >> 4)
		}
		if got != want {
			t.Fatalf("q4_0 q[%d] = %d, want %d", i, got, want)
		}
	}
	// q8_0: d = 16/127, q = round(x·127/16), halves away from zero.
	var b8 [34]byte
	QuantizeQ8_0Block(&b8, &x)
	for i := range 32 {
		want := int8(math.Round(float64(x[i] * (1 / (float32(16) / 127)))))
		if got := int8(b8[2+i]); got != want {
			t.Fatalf("q8_0 q[%d] = %d, want %d", i, got, want)
		}
	}
	if int8(b8[2]) != -127 {
		t.Fatalf("q8_0 of the max element = %d", int8(b8[2]))
	}
}

// scalarQ4K and scalarQ6K decode element p of a super-block straight from
// the format description, independently of the block decoders.
func scalarQ4K(b []byte, p int) float32 {
	d := F16ToF32(binary.LittleEndian.Uint16(b[0:]))
	dmin := F16ToF32(binary.LittleEndian.Uint16(b[2:]))
	s := b[4:16]
	j := p / 32
	var sc, m uint8
	if j < 4 {
		sc, m = s[j]&0x3f, s[4+j]&0x3f
	} else {
		sc = s[8+j-4]&0x0f | (s[j-4]>>6)<<4
		m = s[8+j-4]>>4 | (s[4+j-4]>>6)<<4
	}
	qb := b[16+32*(j/2)+p%32]
	q := qb & 0xf
	if j%2 == 1 {
		q = qb >> 4
	}
	return float32(d*float32(sc)*float32(q)) - dmin*float32(m)
}

func scalarQ6K(b []byte, p int) float32 {
	d := F16ToF32(binary.LittleEndian.Uint16(b[208:]))
	n, r := p/128, p%128
	k, l := r/32, r%32
	lb := b[64*n+l+32*(k&1)]
	lo := lb & 0xf
	if k >= 2 {
		lo = lb >> 4
	}
	hi := (b[128+32*n+l] >> (2 * k)) & 3
	q := int(lo|hi<<4) - 32
	return d * float32(int8(b[192+p/16])) * float32(q)
}

func TestKQuantBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 200 {
		var b4 [144]byte
		var b6 [210]byte
		for i := range b4 {
			b4[i] = byte(r.Uint32())
		}
		for i := range b6 {
			b6[i] = byte(r.Uint32())
		}
		// Keep the f16 scales finite and modest.
		binary.LittleEndian.PutUint16(b4[0:], F32ToF16(float32(r.Float64()*0.01)))
		binary.LittleEndian.PutUint16(b4[2:], F32ToF16(float32(r.Float64()*0.01)))
		binary.LittleEndian.PutUint16(b6[208:], F32ToF16(float32(r.Float64()*0.01)))
		if iter == 0 {
			// A hand-made block: d=1, dmin=0.5, sub-block 5 has scale 37, min 50.
			clear(b4[:])
			binary.LittleEndian.PutUint16(b4[0:], 0x3c00)
			binary.LittleEndian.PutUint16(b4[2:], 0x3800)
			// scale 37 = 0b100101: low nibble 5 in byte 8+1, top bits 0b10 in byte 1.
			// min 50 = 0b110010: low nibble 2 in byte 9's high nibble, top 0b11 in byte 5.
			b4[4+9] = 5 | 2<<4
			b4[4+1] = 0b10 << 6
			b4[4+5] = 0b11 << 6
			b4[16+64+7] = 0x90 // element 5*32+7 is the high nibble of qs[64+7]: q=9
		}
		var y4 [256]float32
		var y6 [256]float32
		DequantizeQ4_KBlock(&y4, &b4)
		DequantizeQ6_KBlock(&y6, &b6)
		for p := range 256 {
			if w := scalarQ4K(b4[:], p); y4[p] != w {
				t.Fatalf("iter %d q4_K[%d] = %g, want %g", iter, p, y4[p], w)
			}
			if w := scalarQ6K(b6[:], p); y6[p] != w {
				t.Fatalf("iter %d q6_K[%d] = %g, want %g", iter, p, y6[p], w)
			}
		}
		if iter == 0 {
			if y4[5*32+7] != 37*9-0.5*50 || y4[5*32+8] != -25 || y4[0] != 0 {
				t.Fatalf("hand-made q4_K block: %g %g %g", y4[5*32+7], y4[5*32+8], y4[0])
			}
		}
	}
}

func TestDequantizeErrors(t *testing.T) {
	dst := make([]float32, 32)
	if err := Dequantize(dst, Q8_0, make([]byte, 33)); err == nil {
		t.Error("short q8_0 input accepted")
	}
	if err := Dequantize(dst[:31], Q8_0, make([]byte, 34)); err == nil {
		t.Error("partial block accepted")
	}
	if err := Dequantize(dst, I32, make([]byte, 128)); err == nil {
		t.Error("i32 accepted")
	}
	if err := Dequantize(dst, Codec(200), nil); err == nil {
		t.Error("unknown codec accepted")
	}
	if err := Quantize(make([]byte, 10), Q4_0, dst); err == nil {
		t.Error("quantize into a short buffer accepted")
	}
}

func FuzzDequantize(f *testing.F) {
	f.Add(uint8(Q8_0), uint16(32), make([]byte, 34))
	f.Add(uint8(Q4_0), uint16(64), make([]byte, 36))
	f.Add(uint8(Q4_K), uint16(256), make([]byte, 144))
	f.Add(uint8(Q6_K), uint16(256), make([]byte, 210))
	f.Add(uint8(F16), uint16(3), []byte{0, 0x7c, 1, 0x7e, 0xff, 0xff})
	f.Add(uint8(BF16), uint16(1), []byte{1, 2})
	f.Add(uint8(F32), uint16(1), []byte{1, 2, 3})
	f.Add(uint8(9), uint16(1), []byte{1, 2, 3, 4})
	for c := Q4_1; c < NumCodecs; c++ {
		b := make([]byte, c.BlockBytes())
		for i := range b {
			b[i] = byte(37 * i)
		}
		f.Add(uint8(c), uint16(c.BlockLen()), b)
	}
	f.Fuzz(func(t *testing.T, codec uint8, n uint16, src []byte) {
		c := Codec(codec)
		dst := make([]float32, int(n))
		err := Dequantize(dst, c, src)
		// A codec with a side field is decoded whole (DecodeRows), never
		// from its rows alone.
		want := c.Valid() && c != I32 && !c.HasSide()
		if want {
			rb, e := c.RowBytes(int(n))
			want = e == nil && rb == len(src)
		}
		if (err == nil) != want {
			t.Fatalf("codec %d n %d len %d: err %v", codec, n, len(src), err)
		}
	})
}

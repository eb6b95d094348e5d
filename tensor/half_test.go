package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

func isNaN32(f float32) bool { return f != f }

func TestF16RoundTripAll(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToF32(h)
		if isNaN32(f) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("%#04x decoded to NaN", h)
			}
			if g := F32ToF16(f); g&0x7c00 != 0x7c00 || g&0x3ff == 0 || g&0x8000 != h&0x8000 {
				t.Fatalf("NaN %#04x re-encoded as %#04x", h, g)
			}
			continue
		}
		if g := F32ToF16(f); g != h {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, g)
		}
	}
}

func TestF16KnownValues(t *testing.T) {
	for _, c := range []struct {
		h uint16
		f float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.960464477539063e-08},
		{0x03ff, 6.097555160522461e-05}, {0x0400, 6.103515625e-05}, {0x3555, 0.333251953125},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))}, {0x8000, float32(math.Copysign(0, -1))},
	} {
		if g := F16ToF32(c.h); math.Float32bits(g) != math.Float32bits(c.f) {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", c.h, g, c.f)
		}
	}
	for _, c := range []struct {
		f float32
		h uint16
	}{
		{65519.99, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {-1e10, 0xfc00},
		{2.9802322387695312e-08, 0x0000},               // exactly half the smallest subnormal: tie to even (0)
		{2.9802326e-08, 0x0001},                        // just above the tie
		{8.940696716308594e-08, 0x0002},                // 1.5 ulp: tie to even (2)
		{1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02}, // ties to even
		{float32(math.Copysign(0, -1)), 0x8000}, {1e-30, 0}, {-1e-30, 0x8000},
	} {
		if g := F32ToF16(c.f); g != c.h {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, g, c.h)
		}
	}
}

// refToF16 rounds |f| to the nearest binary16 by searching the table of
// half values; ties go to the even encoding; at or beyond 65520 it is Inf.
func refToF16(f float32) uint16 {
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	x := math.Abs(float64(f))
	// Largest h in [0, 0x7bff] with value(h) <= x.
	lo, hi := 0, 0x7bff
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if float64(F16ToF32(uint16(mid))) <= x {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	a := float64(F16ToF32(uint16(lo)))
	var b float64
	if lo == 0x7bff {
		b = 65536
	} else {
		b = float64(F16ToF32(uint16(lo + 1)))
	}
	h := lo
	switch {
	case x-a > b-x:
		h = lo + 1
	case x-a == b-x && lo&1 == 1:
		h = lo + 1
	}
	if h > 0x7bff {
		return sign | 0x7c00
	}
	return sign | uint16(h)
}

func TestF32ToF16Rounding(t *testing.T) {
	check := func(f float32) {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return
		}
		if g, w := F32ToF16(f), refToF16(f); g != w {
			t.Fatalf("F32ToF16(%g [%#08x]) = %#04x, want %#04x", f, math.Float32bits(f), g, w)
		}
	}
	// Every midpoint between adjacent halves, and its float32 neighbours.
	for h := range 0x7c00 {
		a := float64(F16ToF32(uint16(h)))
		b := 65536.0
		if h < 0x7bff {
			b = float64(F16ToF32(uint16(h + 1)))
		}
		m := float32((a + b) / 2)
		for _, v := range []float32{m, math.Nextafter32(m, 0), math.Nextafter32(m, 1e9), float32(a)} {
			check(v)
			check(-v)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(math.Float32frombits(r.Uint32()))
		// Focus on the half range.
		check(math.Float32frombits(uint32(r.IntN(0x47800000-0x33000000)) + 0x33000000))
	}
}

func TestBF16(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if isNaN32(f) {
			if g := F32ToBF16(f); g&0x7f80 != 0x7f80 || g&0x7f == 0 {
				t.Fatalf("NaN %#04x re-encoded as %#04x", h, g)
			}
			continue
		}
		if g := F32ToBF16(f); g != h {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, g)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1 << 20 {
		f := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(f)) {
			if g := F32ToBF16(f); !isNaN32(BF16ToF32(g)) {
				t.Fatalf("NaN %#08x lost", math.Float32bits(f))
			}
			continue
		}
		g := F32ToBF16(f)
		// Nearest: compare against the two truncation neighbours in float64.
		b := math.Float32bits(f)
		lo := BF16ToF32(uint16(b >> 16))
		hi := BF16ToF32(uint16(b>>16) + 1)
		dl := math.Abs(float64(f) - float64(lo))
		dh := math.Abs(float64(hi) - float64(f))
		want := uint16(b >> 16)
		if math.IsInf(float64(hi), 0) {
			// Beyond the largest finite bf16: overflow threshold is the midpoint
			// to 2^128.
			dh = math.Abs(math.Copysign(math.Ldexp(1, 128), float64(f)) - float64(f))
		}
		if dh < dl || (dh == dl && want&1 == 1) {
			want++
		}
		if g != want {
			t.Fatalf("F32ToBF16(%g [%#08x]) = %#04x, want %#04x", f, b, g, want)
		}
	}
}

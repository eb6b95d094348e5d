package tensor

import (
	"math"
	"math/rand"
	"testing"
)

var seedList = []Codec{Q8_ROW, Q4_TILED, Q4TP, Q2TP, Q1, Q1G, Q1T}

// TestSeedCodecs: each seed codec round-trips random rows with a relative
// error its bit width allows, decodes the same through Dequantize and
// SetElem, and SetElem on a value already representable changes nothing.
func TestSeedCodecs(t *testing.T) {
	maxRel := map[Codec]float64{Q8_ROW: 0.01, Q4_TILED: 0.15, Q4TP: 0.15, Q2TP: 0.6, Q1: 0.9, Q1G: 0.9, Q1T: 0.6}
	rng := rand.New(rand.NewSource(1))
	for _, c := range seedList {
		n := 4 * 128
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * float32(1+i/64)
		}
		x[5] = 0
		b := make([]byte, n/c.BlockLen()*c.BlockBytes())
		if err := Quantize(b, c, x); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, n)
		if err := Dequantize(y, c, b); err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for i := range x {
			num += float64((x[i] - y[i]) * (x[i] - y[i]))
			den += float64(x[i] * x[i])
		}
		if rel := math.Sqrt(num / den); rel > maxRel[c] {
			t.Errorf("%s: relative error %.3f > %.3f", c, rel, maxRel[c])
		}
		if !CanSetElem(c) {
			t.Fatalf("%s: no SetElem", c)
		}
		bl, bb := c.BlockLen(), c.BlockBytes()
		b2 := append([]byte(nil), b...)
		for i := range x {
			blk := b2[i/bl*bb : (i/bl+1)*bb]
			got, _ := SetElem(c, blk, i%bl, y[i])
			if got != y[i] {
				t.Fatalf("%s: SetElem(%d, %g) decodes %g", c, i, y[i], got)
			}
		}
		if string(b2) != string(b) {
			t.Errorf("%s: SetElem of decoded values changed the bytes", c)
		}
		if c.String() == "" {
			t.Fatal()
		}
		if p, err := ParseCodec(c.String()); err != nil || p != c {
			t.Errorf("ParseCodec(%q) = %v, %v", c, p, err)
		}
	}
}

// TestSeedZeroRung: a q2tp chunk of zeros beside a large one takes rung 0
// and decodes to exact zeros.
func TestSeedZeroRung(t *testing.T) {
	x := make([]float32, 64)
	for i := 32; i < 64; i++ {
		x[i] = float32(i - 48)
	}
	b := make([]byte, 20)
	if err := Quantize(b, Q2TP, x); err != nil {
		t.Fatal(err)
	}
	if b[18]&0xf != 0 {
		t.Fatalf("rung of the zero chunk is %d", b[18]&0xf)
	}
	y := make([]float32, 64)
	Dequantize(y, Q2TP, b)
	for i := range 32 {
		if y[i] != 0 {
			t.Fatalf("element %d = %g", i, y[i])
		}
	}
}

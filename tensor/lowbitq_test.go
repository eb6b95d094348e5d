package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLowbitRoundTrip encodes Gaussian rows with every GGUF codec of
// lowbitq.go and decodes them: the relative RMS error must sit where the
// codec's bits put it (the encoders are round-to-nearest, so the bounds are
// loose; the ternary codes lose the block holding the outlier whole).
func TestLowbitRoundTrip(t *testing.T) {
	bound := map[Codec]float64{
		Q4_1: 0.12, Q5_0: 0.06, Q5_1: 0.06, Q2_K: 0.45, Q3_K: 0.25, Q5_K: 0.06,
		IQ4_NL: 0.12, IQ4_XS: 0.12, IQ3_XXS: 0.3, IQ3_S: 0.3, IQ2_XXS: 0.5, IQ2_XS: 0.5,
		IQ2_S: 0.5, IQ1_S: 0.8, IQ1_M: 0.8, TQ1_0: 0.85, TQ2_0: 0.85, MXFP4: 0.2,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * 0.02
	}
	x[5] = 0.3 // an outlier
	// The GGUF codecs (seed_test.go tests the seed's).
	for c := Q4_1; c <= MXFP4; c++ {
		n, _ := c.RowBytes(len(x))
		q := make([]byte, n)
		if err := Quantize(q, c, x); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		y := make([]float32, len(x))
		if err := Dequantize(y, c, q); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var e, s float64
		for i := range x {
			d := float64(y[i] - x[i])
			e += d * d
			s += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(e / s)
		t.Logf("%-8s rel rms %.3f", c, rel)
		if !(rel <= bound[c]) {
			t.Errorf("%s: relative RMS error %.3f, want <= %.2f", c, rel, bound[c])
		}
	}
}

// TestTernaryExact: ternary values (and the block's scale) survive tq1_0
// and tq2_0 exactly, which checks the base-3 and 2-bit packings.
func TestTernaryExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 512)
	for i := range x {
		x[i] = float32(rng.IntN(3)-1) * 0.5
	}
	for _, c := range []Codec{TQ1_0, TQ2_0} {
		n, _ := c.RowBytes(len(x))
		q := make([]byte, n)
		y := make([]float32, len(x))
		if err := Quantize(q, c, x); err != nil {
			t.Fatal(err)
		}
		if err := Dequantize(y, c, q); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s: element %d: %g, want %g", c, i, y[i], x[i])
			}
		}
	}
}

package kernel

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// sameBits reports whether a and b are the same float32, bit for bit (any
// two NaNs count as the same).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestPortableBitIdentical checks the unrolled portable kernels against the
// loops they replaced (portable_ref_test.go) bit for bit: rows of random
// bytes (every weight and scale bit pattern, infinities and NaNs in the
// half-precision scales and weights included), activations of every
// magnitude, lengths with and without tails.
func TestPortableBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 16))
	xOf := func(n int, k int) []float32 {
		x := make([]float32, n)
		for i := range x {
			switch k % 3 {
			case 0:
				x[i] = float32(r.NormFloat64())
			case 1: // wide exponents: rounding in every partial sum
				x[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(40)-20)))
			default: // raw bits, NaN and infinities included
				x[i] = math.Float32frombits(r.Uint32())
			}
		}
		return x
	}
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for k := range 60 {
		for _, n := range []int{0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 896, 4864} {
			x := xOf(n, k)
			a := xOf(n, k+1)
			if got, want := dotGeneric(a, x), dotGenericRef(a, x); !sameBits(got, want) {
				t.Fatalf("f32 dot, n=%d: %g, want %g", n, got, want)
			}
			row := bytesOf(2 * n)
			if k%2 == 0 { // finite halves
				for i := 0; i < len(row); i += 2 {
					row[i+1] &= 0xbb
				}
			}
			if got, want := dotF16Row(row, x), dotF16RowRef(row, x); !sameBits(got, want) {
				t.Fatalf("f16 row, n=%d: %g, want %g", n, got, want)
			}
			if n%32 != 0 {
				continue
			}
			for _, c := range []struct {
				codec     tensor.Codec
				got, want func([]byte, []float32) float32
			}{{tensor.Q8_0, dotQ8_0Row, dotQ8_0RowRef}, {tensor.Q4_0, dotQ4_0Row, dotQ4_0RowRef}} {
				rb, _ := c.codec.RowBytes(n)
				row := bytesOf(rb)
				if k%2 == 0 { // finite scales
					for b := 0; b < len(row); b += c.codec.BlockBytes() {
						binary.LittleEndian.PutUint16(row[b:], binary.LittleEndian.Uint16(row[b:])&0xbbff)
					}
				}
				if got, want := c.got(row, x), c.want(row, x); !sameBits(got, want) {
					t.Fatalf("%s row, n=%d: %g, want %g", c.codec, n, got, want)
				}
			}
		}
	}
}

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
		for _, n := range []int{0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 256, 896, 4864, 5120} {
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
			if n%256 == 0 {
				row := bytesOf(144 * n / 256)
				if k%2 == 0 { // finite scales
					for b := 0; b < len(row); b += 144 {
						row[b+1] &= 0xbb
						row[b+3] &= 0xbb
					}
				}
				row6 := bytesOf(210 * n / 256)
				if k%2 == 0 {
					for b := 0; b < len(row6); b += 210 {
						row6[b+209] &= 0xbb
					}
				}
				if got, want := dotQ6_KRow(row6, x), dotQ6_KRowRef(row6, x); !sameBits(got, want) {
					t.Fatalf("q6_K row, n=%d: %g, want %g", n, got, want)
				}
				xs := prepareX(tensor.Q4_K, x)
				if got, want := dotQ4_KRowSums(row, x, xs), dotQ4_KRowSumsRef(row, x, xs); !sameBits(got, want) {
					t.Fatalf("q4_K row, n=%d: %g, want %g", n, got, want)
				}
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

// TestSWARBitIdentical checks the SWAR Int8 kernels against the reference
// integer loops bit for bit, on rows of random bytes (every weight value,
// -128 included, and every half-precision scale, infinities and NaNs
// included) and on activations whose blocks hold the extreme values ±127.
func TestSWARBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	for k := range 40 {
		for _, n := range []int{32, 64, 96, 896, 4864} {
			x := make([]float32, n)
			for i := range x {
				switch k % 3 {
				case 0:
					x[i] = float32(r.NormFloat64())
				case 1: // a few large values: most of a block rounds to 0 or ±127
					x[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(30)-15)))
				default: // ±amax only: every q is ±127
					x[i] = float32(1 - 2*float64(r.IntN(2)))
				}
			}
			qx := quantizeX(x)
			qx.packSWAR()
			for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
				rb, _ := c.RowBytes(n)
				row := make([]byte, rb)
				for i := range row {
					row[i] = byte(r.Uint32())
				}
				if k%2 == 0 {
					for b := 0; b < len(row); b += c.BlockBytes() {
						binary.LittleEndian.PutUint16(row[b:], binary.LittleEndian.Uint16(row[b:])&0xbbff)
					}
				}
				if k%5 == 4 { // the extreme weights
					for b := 0; b < len(row); b += c.BlockBytes() {
						v := byte(0x80) // q8_0: -128
						if c == tensor.Q4_0 {
							v = 0xff // 15, 15
						}
						for i := b + 2; i < b+c.BlockBytes(); i++ {
							row[i] = v
						}
					}
				}
				var got, want [1]float32
				swarInt8Kernels[c](got[:], row, rb, qx)
				genericInt8Kernels[c](want[:], row, rb, qx)
				if !sameBits(got[0], want[0]) {
					t.Fatalf("%s, n=%d, case %d: %g, want %g", c, n, k, got[0], want[0])
				}
			}
			putQ8x(qx)
		}
	}
}

// TestGenericInt8MatVec checks that Int8-mode MatVec at the Generic level
// runs the SWAR kernels with the reference loops' results, bit for bit.
func TestGenericInt8MatVec(t *testing.T) {
	defer SetLevel(SetLevel(Generic))
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(18, 18))
	for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
		for _, sh := range [][2]int{{1, 32}, {37, 96}, {130, 896}, {64, 4864}} {
			w := rawWeight(r, c, sh[0], sh[1])
			x := randX(r, sh[1])
			y := make([]float32, sh[0])
			MatVec(y, w, x)
			qx := quantizeX(x)
			want := make([]float32, sh[0])
			genericInt8Kernels[c](want, w.Data, len(w.Data)/sh[0], qx)
			putQ8x(qx)
			for i := range y {
				if !sameBits(y[i], want[i]) {
					t.Fatalf("%s %dx%d row %d: %g, want %g", c, sh[0], sh[1], i, y[i], want[i])
				}
			}
		}
	}
}

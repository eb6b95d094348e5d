package kernel

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cortiq/cortiq/tensor"
)

// lowbitRaw is a weight of random bytes with its scale fields tamed (f16
// scales below 2, mxfp4 exponents near 1), so that every bit pattern of
// the quants is exercised without overflow.
func lowbitRaw(r *rand.Rand, c tensor.Codec, rows, cols int) *tensor.Tensor {
	rb, _ := c.RowBytes(cols)
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	f16 := map[tensor.Codec][]int{
		tensor.Q4_1: {0, 2}, tensor.Q5_0: {0}, tensor.Q5_1: {0, 2}, tensor.Q2_K: {80, 82},
		tensor.Q3_K: {108}, tensor.Q4_K: {0, 2}, tensor.Q5_K: {0, 2}, tensor.Q6_K: {208}, tensor.IQ4_NL: {0}, tensor.IQ4_XS: {0},
	}[c]
	bb := c.BlockBytes()
	for b := 0; b < len(data); b += bb {
		for _, off := range f16 {
			data[b+off+1] &= 0x3f
		}
		if c == tensor.MXFP4 {
			data[b] = byte(120 + r.IntN(16))
		}
	}
	return &tensor.Tensor{Name: "w", Codec: c, Shape: []int{rows, cols}, Data: data}
}

// TestInt8Lowbit checks the Int8 arithmetic of the lowbit codecs at every
// level: the SIMD kernels bit-for-bit against the portable reference
// (dotLowbitInt8), the reference against a float64 evaluation of the
// dequantized weights times the quantized activation (tight), and Int8
// mode against the exact product (loose, the bound of TestInt8).
func TestInt8Lowbit(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(13, 13))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range lowbitInt8Codecs {
			bl := c.BlockLen()
			shapes := [][2]int{{1, 256}, {37, 512}, {130, 2048}, {5, 1024}, {16, 768}}
			if bl == 32 {
				shapes = append(shapes, [2]int{3, 32}, [2]int{9, 96}, [2]int{4, 224})
			}
			for k, sh := range shapes {
				rows, cols := sh[0], sh[1]
				w := randWeight(t, r, c, rows, cols)
				if k%2 == 1 {
					w = lowbitRaw(r, c, rows, cols)
				}
				testLowbitInt8(t, r, w)
			}
		}
	})
}

func testLowbitInt8(t *testing.T, r *rand.Rand, w *tensor.Tensor) {
	t.Helper()
	c, rows, cols := w.Codec, w.Shape[0], w.Shape[1]
	rb, _ := c.RowBytes(cols)
	x := randX(r, cols)
	y := make([]float32, rows)
	MatVec(y, w, x)
	// q4_K and q6_K decode on their packed tiles from AVX512VNNI and on
	// arm64 with their NEON kernels (TestInt8KQuants checks those); on
	// amd64 below AVX512VNNI, MatVec runs the lowbit kernel.
	simd := int8Kernels[c] != nil && !(packedDecode && packable(c)) && !(packable(c) && runtime.GOARCH == "arm64")
	wf := make([]float32, rows*cols)
	if err := tensor.Dequantize(wf, c, w.Data); err != nil {
		t.Fatal(err)
	}
	qx := quantizeX(x)
	defer putQ8x(qx)
	ref := make([]float32, rows)
	for o := range rows {
		ref[o] = dotLowbitInt8(c, w.Data[o*rb:(o+1)*rb], qx)
		var want, mag float64
		for i := range cols {
			xv := float64(qx.d[i/32]) * float64(qx.q[i])
			want += float64(wf[o*cols+i]) * xv
			mag += math.Abs(float64(wf[o*cols+i]) * xv)
		}
		if d := math.Abs(float64(ref[o]) - want); d > 4e-6*mag+1e-30 {
			t.Fatalf("%s %dx%d row %d: reference %g, want %g (diff %g of Σ|wx| %g)", c, rows, cols, o, ref[o], want, d, mag)
		}
		if simd && math.Float32bits(y[o]) != math.Float32bits(ref[o]) {
			t.Fatalf("%s %dx%d row %d: %g (%#x), reference %g (%#x)", c, rows, cols, o, y[o], math.Float32bits(y[o]), ref[o], math.Float32bits(ref[o]))
		}
	}
	if simd && rows > 5 {
		ys := make([]float32, rows-5)
		MatVecRows(ys, w, x, 5, rows-5)
		for o := range ys {
			if math.Float32bits(ys[o]) != math.Float32bits(ref[5+o]) {
				t.Fatalf("%s %dx%d rows from 5, row %d: %g, reference %g", c, rows, cols, 5+o, ys[o], ref[5+o])
			}
		}
	}
	exact, emag := naive(w, x, 0, rows)
	for o := range rows {
		if d := math.Abs(float64(y[o]) - exact[o]); d > 0.02*emag[o] {
			t.Fatalf("%s %dx%d row %d: int8 %g vs exact %g: off by %g of Σ|wx|", c, rows, cols, o, y[o], exact[o], d/emag[o])
		}
	}
}

// TestInt8LowbitError reports the error of Int8 mode against Exact for the
// lowbit codecs on random Gaussian data, with TestInt8Error's bound.
func TestInt8LowbitError(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	for _, c := range lowbitInt8Codecs {
		if int8Kernels[c] == nil {
			t.Skipf("no Int8 kernels at level %s: Int8 mode computes Exact", CurrentLevel())
		}
		rows, cols := 512, 1024
		w := randWeight(t, r, c, rows, cols)
		x := randX(r, cols)
		y := make([]float32, rows)
		prev := SetMode(Int8)
		MatVec(y, w, x)
		SetMode(prev)
		exact, mag := naive(w, x, 0, rows)
		var maxRel, sumSq, refSq float64
		for o := range rows {
			d := float64(y[o]) - exact[o]
			maxRel = max(maxRel, math.Abs(d)/mag[o])
			sumSq += d * d
			refSq += exact[o] * exact[o]
		}
		t.Logf("%s %dx%d: int8 vs exact: max |Δ|/Σ|w·x| = %.2e, rms(Δ)/rms(y) = %.2e", c, rows, cols, maxRel, math.Sqrt(sumSq/refSq))
		if maxRel > 0.01 {
			t.Errorf("%s: int8 error %g", c, maxRel)
		}
	}
}

// TestInt8LowbitNonFinite: a NaN or infinity in the activation reaches
// every output of a lowbit Int8-mode product, as in TestInt8NonFinite.
func TestInt8LowbitNonFinite(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(15, 15))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range lowbitInt8Codecs {
			w := randWeight(t, r, c, 8, 256)
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
				x := randX(r, 256)
				x[77] = bad
				y := make([]float32, 8)
				MatVec(y, w, x)
				for o, v := range y {
					if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
						t.Fatalf("%s, x holding %v: row %d = %v, want a non-finite value", c, bad, o, v)
					}
				}
			}
		}
	})
}

// BenchmarkMatVecLowbit is decode (MatVec) of the lowbit codecs at the
// llama-1b FFN shapes (gate/up 8192×2048, down 2048×8192): Int8 mode at
// each level (generic computes Exact: it has no Int8 kernels), and Exact
// mode at AVX2 (the SIMD decoders). Run with -cpu 1 for one thread.
func BenchmarkMatVecLowbit(b *testing.B) {
	defer SetMode(SetMode(Int8))
	defer SetLevel(CurrentLevel())
	for _, c := range lowbitInt8Codecs {
		for _, sh := range [][2]int{{8192, 2048}, {2048, 8192}} {
			w := lowbitBenchWeight(c, sh[0], sh[1])
			x := randX(rand.New(rand.NewPCG(1, 2)), sh[1])
			y := make([]float32, sh[0])
			for _, v := range []struct {
				l    Level
				m    Mode
				name string
			}{{Generic, Int8, "generic"}, {AVX2, Exact, "avx2_exact"}, {AVX2, Int8, "avx2"}, {AVX512VNNI, Int8, "avx512vnni"}} {
				if !hasLevel(v.l) {
					continue
				}
				b.Run(fmt.Sprintf("%s_%dx%d/%s", c, sh[0], sh[1], v.name), func(b *testing.B) {
					SetLevel(v.l)
					defer SetMode(SetMode(v.m))
					b.SetBytes(int64(len(w.Data)))
					for b.Loop() {
						MatVec(y, w, x)
					}
				})
			}
		}
	}
}

// BenchmarkMatMulLowbit is Int8-mode prefill (64 tokens) of the lowbit
// codecs at the llama-1b gate shape (8192×2048), alternating the levels
// as BenchmarkLowbitLevels does: generic (Exact, tensor.Dequantize rows),
// AVX2 (Exact on the SIMD decoders) and AVX512VNNI (int8 tiles where the
// codec packs, else as AVX2). Run it once: -benchtime 1x -cpu 1.
func BenchmarkMatMulLowbit(b *testing.B) {
	defer SetMode(SetMode(Int8))
	defer SetLevel(CurrentLevel())
	const n, rows, cols, rounds = 64, 8192, 2048, 6
	for _, c := range lowbitInt8Codecs {
		b.Run(c.String(), func(b *testing.B) {
			w := lowbitBenchWeight(c, rows, cols)
			x := randX(rand.New(rand.NewPCG(1, 2)), n*cols)
			y := make([]float32, n*rows)
			levels := []Level{Generic, AVX2, AVX512VNNI}
			best := make([]time.Duration, len(levels))
			for r := range rounds {
				for i, l := range levels {
					if !hasLevel(l) || (l == Generic && r%3 != 0) {
						continue
					}
					SetLevel(l)
					if r == 0 {
						MatMul(y, w, x, n) // packs, where the level packs
					}
					t0 := time.Now()
					MatMul(y, w, x, n)
					if d := time.Since(t0); best[i] == 0 || d < best[i] {
						best[i] = d
					}
				}
			}
			for i, l := range levels {
				if best[i] > 0 {
					b.ReportMetric(float64(best[i].Microseconds())/1000, l.String()+"_ms")
					if i > 0 {
						b.ReportMetric(float64(best[0])/float64(best[i]), l.String()+"_x")
					}
				}
			}
		})
	}
}

func lowbitBenchWeight(c tensor.Codec, rows, cols int) *tensor.Tensor {
	w := lowbitRaw(rand.New(rand.NewPCG(uint64(rows), uint64(cols))), c, rows, cols)
	if c == tensor.MXFP4 {
		return w
	}
	// Scales of about 0.01, as trained weights have.
	half := tensor.F32ToF16(0.01)
	for _, off := range map[tensor.Codec][]int{
		tensor.Q4_1: {0, 2}, tensor.Q5_0: {0}, tensor.Q5_1: {0, 2}, tensor.Q2_K: {80, 82},
		tensor.Q3_K: {108}, tensor.Q4_K: {0, 2}, tensor.Q5_K: {0, 2}, tensor.Q6_K: {208}, tensor.IQ4_NL: {0}, tensor.IQ4_XS: {0},
	}[c] {
		for b := 0; b < len(w.Data); b += c.BlockBytes() {
			binary.LittleEndian.PutUint16(w.Data[b+off:], half)
		}
	}
	return w
}

// TestLowbitDecoders checks the row decoders of the lowbit codecs (the
// SIMD ones from level AVX2) bit for bit against tensor.Dequantize, and
// the Exact MatVec and MatMul built on them against a float64 product, at
// every level.
func TestLowbitDecoders(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 16))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range lowbitInt8Codecs {
			shapes := [][2]int{{3, 256}, {5, 512}, {2, 2048}, {7, 768}}
			if c.BlockLen() == 32 {
				shapes = append(shapes, [2]int{4, 32}, [2]int{3, 96}, [2]int{2, 224})
			}
			for k, sh := range shapes {
				rows, cols := sh[0], sh[1]
				w := randWeight(t, r, c, rows, cols)
				if k%2 == 1 {
					w = lowbitRaw(r, c, rows, cols)
				}
				want := make([]float32, rows*cols)
				if err := tensor.Dequantize(want, c, w.Data); err != nil {
					t.Fatal(err)
				}
				rb, _ := c.RowBytes(cols)
				got := make([]float32, cols)
				for o := range rows {
					decodeRow(got, c, w.Data[o*rb:(o+1)*rb])
					for i, v := range got {
						if math.Float32bits(v) != math.Float32bits(want[o*cols+i]) {
							t.Fatalf("%s %dx%d row %d element %d: %g (%#x), want %g (%#x)", c, rows, cols, o, i, v, math.Float32bits(v), want[o*cols+i], math.Float32bits(want[o*cols+i]))
						}
					}
				}
				x := randX(r, 3*cols)
				y := make([]float32, rows)
				MatVec(y, w, x[:cols])
				ref, mag := naive(w, x[:cols], 0, rows)
				checkClose(t, fmt.Sprintf("%s %dx%d MatVec", c, rows, cols), y, ref, mag)
				ym := make([]float32, 3*rows)
				MatMul(ym, w, x, 3)
				for tok := range 3 {
					ref, mag := naive(w, x[tok*cols:(tok+1)*cols], 0, rows)
					checkClose(t, fmt.Sprintf("%s %dx%d MatMul token %d", c, rows, cols, tok), ym[tok*rows:(tok+1)*rows], ref, mag)
				}
			}
		}
	})
}

// TestInt8MatMulLowbit checks Int8-mode MatMul (prefill) of the lowbit
// codecs at every level: where the level packs them into int8 tiles
// (AVX512VNNI: all but mxfp4, q2_K and q3_K), against a float64 evaluation
// of the same quantized arithmetic (tight); everywhere, against the exact
// product (loose), as TestInt8MatMul does for q4_0 and q8_0.
func TestInt8MatMulLowbit(t *testing.T) {
	defer SetMode(SetMode(Int8))
	r := rand.New(rand.NewPCG(17, 17))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range lowbitInt8Codecs {
			shapes := [][3]int{{16, 256, 8}, {37, 512, 3}, {130, 768, 17}, {9, 256, 2}, {40, 1024, 9}}
			if c.BlockLen() == 32 {
				shapes = append(shapes, [3]int{17, 32, 5}, [3]int{20, 96, 9}, [3]int{33, 224, 2})
			}
			for k, sh := range shapes {
				rows, cols, n := sh[0], sh[1], sh[2]
				w := randWeight(t, r, c, rows, cols)
				if k%2 == 1 {
					w = lowbitRaw(r, c, rows, cols)
				}
				tiles := packedDecode && lowbitPackable(c) // the levels with int8 tiles
				wf := make([]float32, rows*cols)
				if err := tensor.Dequantize(wf, c, w.Data); err != nil {
					t.Fatal(err)
				}
				x := randX(r, n*cols)
				y := make([]float32, n*rows)
				for rep := range 2 { // the second call reuses the packed weight
					MatMul(y, w, x, n)
					for tok := range n {
						xt := x[tok*cols : (tok+1)*cols]
						yt := y[tok*rows : (tok+1)*rows]
						if tiles {
							qx := quantizeX(xt)
							for o := range rows {
								var want, mag float64
								for i := range cols {
									xv := float64(qx.d[i/32]) * float64(qx.q[i])
									want += float64(wf[o*cols+i]) * xv
									mag += math.Abs(float64(wf[o*cols+i]) * xv)
								}
								if d := math.Abs(float64(yt[o]) - want); d > 4e-6*mag+1e-30 {
									t.Fatalf("%s %dx%d n=%d rep %d token %d row %d: %g, want %g (diff %g)", c, rows, cols, n, rep, tok, o, yt[o], want, d)
								}
							}
							putQ8x(qx)
						}
						exact, emag := naive(w, xt, 0, rows)
						for o := range rows {
							if d := math.Abs(float64(yt[o]) - exact[o]); d > 0.02*emag[o] {
								t.Fatalf("%s %dx%d token %d row %d: int8 %g vs exact %g: off by %g of Σ|wx|", c, rows, cols, tok, o, yt[o], exact[o], d/emag[o])
							}
						}
					}
				}
			}
		}
	})
}

// BenchmarkLowbitLevels measures single-call MatVec times of each lowbit
// codec at the llama-1b gate shape (8192×2048) at each level, alternating
// the levels call by call and keeping each one's fastest call, so that on
// a shared machine the ratios compare like with like. It reports the
// minimum ms per level and the speed-ups over the generic (Exact) code.
// Run it once: go test -run X -bench LowbitLevels -benchtime 1x -cpu 1.
func BenchmarkLowbitLevels(b *testing.B) {
	defer SetMode(SetMode(Int8))
	defer SetLevel(CurrentLevel())
	type variant struct {
		l    Level
		m    Mode
		name string
	}
	vs := []variant{{Generic, Int8, "generic"}, {AVX2, Exact, "avx2_exact"}, {AVX2, Int8, "avx2"}, {AVX512VNNI, Int8, "avx512vnni"}}
	const rows, cols, rounds = 8192, 2048, 30
	// The seed's four codecs first, for reference.
	for _, c := range append([]tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K, tensor.Q6_K}, lowbitInt8Codecs...) {
		b.Run(c.String(), func(b *testing.B) {
			w := benchWeight(c, rows, cols)
			if slices.Contains(lowbitInt8Codecs, c) {
				w = lowbitBenchWeight(c, rows, cols)
			}
			x := randX(rand.New(rand.NewPCG(1, 2)), cols)
			y := make([]float32, rows)
			best := make([]time.Duration, len(vs))
			for r := range rounds {
				for i, v := range vs {
					if !hasLevel(v.l) || (v.l == Generic && r%3 != 0) {
						continue
					}
					SetLevel(v.l)
					SetMode(v.m)
					t0 := time.Now()
					MatVec(y, w, x)
					if d := time.Since(t0); best[i] == 0 || d < best[i] {
						best[i] = d
					}
				}
			}
			for i, v := range vs {
				if best[i] > 0 {
					b.ReportMetric(float64(best[i].Microseconds())/1000, v.name+"_ms")
					if i > 0 {
						b.ReportMetric(float64(best[0])/float64(best[i]), v.name+"_x")
					}
				}
			}
		})
	}
}

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

var allCodecs = []tensor.Codec{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K}

// randWeight builds a [rows, cols] tensor of random values encoded with c.
func randWeight(t testing.TB, r *rand.Rand, c tensor.Codec, rows, cols int) *tensor.Tensor {
	t.Helper()
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * 0.5
	}
	rb, err := c.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*rb)
	if err := tensor.Quantize(data, c, x); err != nil {
		t.Fatal(err)
	}
	return &tensor.Tensor{Name: "w", Codec: c, Shape: []int{rows, cols}, Data: data}
}

// naive dequantizes w and dots in float64; it also returns Σ|w·x| for the
// tolerance.
func naive(w *tensor.Tensor, x []float32, row0, nrows int) (y, mag []float64) {
	cols := w.Cols()
	wf := make([]float32, w.Elements())
	if err := tensor.Dequantize(wf, w.Codec, w.Data); err != nil {
		panic(err)
	}
	y = make([]float64, nrows)
	mag = make([]float64, nrows)
	for o := range nrows {
		for i := range cols {
			p := float64(wf[(row0+o)*cols+i]) * float64(x[i])
			y[o] += p
			mag[o] += math.Abs(p)
		}
	}
	return y, mag
}

func checkClose(t *testing.T, what string, got []float32, want, mag []float64) {
	t.Helper()
	for i := range want {
		// float32 accumulation: error grows ~ sqrt(n)·eps·Σ|p|; allow a
		// generous multiple of eps·Σ|p|.
		tol := 4e-6*mag[i] + 1e-30
		if d := math.Abs(float64(got[i]) - want[i]); d > tol || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: y[%d] = %g, want %g (diff %g, tol %g)", what, i, got[i], want[i], d, tol)
		}
	}
}

// forEachImpl runs f at every kernel level this CPU supports, from the
// portable kernels up (each level forced with SetLevel).
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer SetLevel(CurrentLevel())
	for _, l := range testLevels() {
		SetLevel(l)
		t.Run(l.String(), f)
	}
}

// testLevels lists the levels of this build the CPU has, lowest first.
func testLevels() []Level {
	ls := Levels()
	return ls[:slices.Index(ls, Detected())+1]
}

// hasLevel reports whether this build and CPU run level l.
func hasLevel(l Level) bool { return slices.Contains(testLevels(), l) }

func randX(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func TestMatVec(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 1))
		for _, c := range allCodecs {
			bl := max(c.BlockLen(), 1)
			for _, sh := range [][2]int{{1, bl}, {3, bl}, {7, 2 * bl}, {33, 4 * bl}, {130, 256}, {257, 512}, {5, 2816}, {1001, bl * 3}} {
				rows, cols := sh[0], sh[1]
				if cols%bl != 0 {
					continue
				}
				w := randWeight(t, r, c, rows, cols)
				x := randX(r, cols)
				y := make([]float32, rows)
				MatVec(y, w, x)
				want, mag := naive(w, x, 0, rows)
				checkClose(t, fmt.Sprintf("%s %dx%d", c, rows, cols), y, want, mag)
			}
			// Odd, non-block-multiple columns for the plain codecs.
			if bl == 1 {
				for _, cols := range []int{1, 3, 17, 129} {
					w := randWeight(t, r, c, 9, cols)
					x := randX(r, cols)
					y := make([]float32, 9)
					MatVec(y, w, x)
					want, mag := naive(w, x, 0, 9)
					checkClose(t, fmt.Sprintf("%s 9x%d", c, cols), y, want, mag)
				}
			}
		}
	})
}

func TestMatVecUnaligned(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		w := randWeight(t, r, tensor.F32, 17, 33)
		buf := make([]byte, len(w.Data)+1)
		copy(buf[1:], w.Data)
		wu := &tensor.Tensor{Codec: tensor.F32, Shape: w.Shape, Data: buf[1:]}
		x := randX(r, 33)
		y := make([]float32, 17)
		MatVec(y, wu, x)
		want, mag := naive(w, x, 0, 17)
		checkClose(t, "unaligned f32", y, want, mag)
	})
}

func TestMatVecRowsExperts(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(2, 2))
		const experts, out, in = 4, 48, 256
		for _, c := range allCodecs {
			w := randWeight(t, r, c, experts*out, in)
			w.Shape = []int{experts, out, in}
			x := randX(r, in)
			for e := range experts {
				y := make([]float32, out)
				MatVecRows(y, w, x, e*out, out)
				want, mag := naive(w, x, e*out, out)
				checkClose(t, fmt.Sprintf("%s expert %d", c, e), y, want, mag)
			}
		}
	})
}

func TestMatMul(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 3))
		for _, c := range allCodecs {
			bl := max(c.BlockLen(), 1)
			for _, sh := range [][3]int{{1, bl, 5}, {13, 2 * bl, 3}, {67, 512, 9}, {9, 256, 1}, {40, 768, 17}, {12, 512, 16}, {7, 256, 10}, {25, 64, 33}, {7, 8192, 70}, {5, 3, 12}, {8, 17, 21}} {
				rows, cols, n := sh[0], sh[1], sh[2]
				if cols%bl != 0 {
					continue
				}
				w := randWeight(t, r, c, rows, cols)
				x := randX(r, n*cols)
				y := make([]float32, n*rows)
				MatMul(y, w, x, n)
				for tk := range n {
					want, mag := naive(w, x[tk*cols:(tk+1)*cols], 0, rows)
					checkClose(t, fmt.Sprintf("%s %dx%d n=%d token %d", c, rows, cols, n, tk), y[tk*rows:(tk+1)*rows], want, mag)
				}
			}
		}
	})
}

func TestConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	w := randWeight(t, r, tensor.Q4_0, 300, 512)
	x := randX(r, 512)
	want := make([]float32, 300)
	MatVec(want, w, x)
	done := make(chan []float32)
	for range 8 {
		go func() {
			y := make([]float32, 300)
			for range 20 {
				MatVec(y, w, x)
			}
			done <- y
		}()
	}
	for range 8 {
		y := <-done
		for i := range y {
			if y[i] != want[i] {
				t.Fatalf("concurrent result differs at %d", i)
			}
		}
	}
}

func TestVec(t *testing.T) {
	x := []float32{1, 2, 3, 4}
	d := make([]float32, 4)
	RMSNorm(d, x, []float32{1, 1, 1, 2}, 0, false)
	inv := 1 / math.Sqrt(30.0/4)
	for i, v := range d {
		w := float64(x[i]) * inv
		if i == 3 {
			w *= 2
		}
		if math.Abs(float64(v)-w) > 1e-6 {
			t.Fatalf("RMSNorm[%d] = %g, want %g", i, v, w)
		}
	}
	s := []float32{1, 2, 3}
	Softmax(s)
	if math.Abs(float64(s[0]+s[1]+s[2])-1) > 1e-6 || s[2] < s[1] {
		t.Fatalf("softmax %v", s)
	}
	a := []float32{-1, 0, 1}
	SiLU(a)
	if math.Abs(float64(a[2])-0.7310586) > 1e-6 || a[1] != 0 {
		t.Fatalf("silu %v", a)
	}
	g := []float32{1}
	GELUTanh(g)
	if math.Abs(float64(g[0])-0.8411920) > 1e-6 {
		t.Fatalf("gelu %v", g)
	}
}

// TestDecodersExact checks that every row decoder MatMul uses gives
// exactly tensor.Dequantize's values.
func TestDecodersExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range allCodecs {
			for _, cols := range []int{256, 512, 1024 + 256} {
				w := randWeight(t, r, c, 1, cols)
				if c.Quantized() {
					w = rawWeight(r, c, 1, cols)
				}
				want := make([]float32, cols)
				if err := tensor.Dequantize(want, c, w.Data); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, cols)
				decodeRow(got, c, w.Data)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s cols %d: [%d] = %g, want %g", c, cols, i, got[i], want[i])
					}
				}
			}
		}
	})
}

// rawWeight is a [rows, cols] tensor of random bytes with the f16 block
// scales kept finite (every scale/min/quant bit pattern occurs).
func rawWeight(r *rand.Rand, c tensor.Codec, rows, cols int) *tensor.Tensor {
	rb, _ := c.RowBytes(cols)
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	bb := c.BlockBytes()
	for b := 0; b < len(data); b += bb {
		switch c {
		case tensor.Q6_K:
			data[b+209] &= 0x3f
		case tensor.Q4_K:
			data[b+1] &= 0x3f
			data[b+3] &= 0x3f
		case tensor.Q8_0, tensor.Q4_0:
			data[b+1] &= 0x3f
		}
	}
	return &tensor.Tensor{Name: "raw", Codec: c, Shape: []int{rows, cols}, Data: data}
}

func TestMatVecRawBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
			for _, sh := range [][2]int{{5, 256}, {19, 768}, {64, 2048}} {
				w := rawWeight(r, c, sh[0], sh[1])
				x := randX(r, sh[1])
				y := make([]float32, sh[0])
				MatVec(y, w, x)
				want, mag := naive(w, x, 0, sh[0])
				checkClose(t, fmt.Sprintf("raw %s %dx%d", c, sh[0], sh[1]), y, want, mag)
				n := 11
				xs := randX(r, n*sh[1])
				ys := make([]float32, n*sh[0])
				MatMul(ys, w, xs, n)
				for tk := range n {
					want, mag := naive(w, xs[tk*sh[1]:(tk+1)*sh[1]], 0, sh[0])
					checkClose(t, fmt.Sprintf("raw matmul %s %dx%d t%d", c, sh[0], sh[1], tk), ys[tk*sh[0]:(tk+1)*sh[0]], want, mag)
				}
			}
		}
	})
}

func TestEmptyShapes(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, c := range allCodecs {
			// No rows.
			w := &tensor.Tensor{Codec: c, Shape: []int{0, 256}}
			MatVec(nil, w, make([]float32, 256))
			MatMul(nil, w, make([]float32, 3*256), 3)
			if c.BlockLen() == 1 {
				// No columns: every output is an empty sum.
				w := &tensor.Tensor{Codec: c, Shape: []int{4, 0}}
				y := []float32{1, 2, 3, 4}
				MatVec(y, w, nil)
				y3 := make([]float32, 12)
				for i := range y3 {
					y3[i] = 1
				}
				MatMul(y3, w, nil, 3)
				for i, v := range append(y, y3...) {
					if v != 0 {
						t.Fatalf("%s: empty row gave y[%d] = %g", c, i, v)
					}
				}
			}
		}
	})
}

package quant

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// correlated draws n input rows of cols values with strongly correlated
// features (a few latent factors plus noise), as a layer's inputs are.
func correlated(rng *rand.Rand, n, cols int) []float32 {
	mix := make([]float64, 4*cols)
	for i := range mix {
		mix[i] = rng.NormFloat64()
	}
	x := make([]float32, n*cols)
	for t := range n {
		var f [4]float64
		for k := range f {
			f[k] = rng.NormFloat64() * float64(4-k)
		}
		for j := range cols {
			v := 0.1 * rng.NormFloat64()
			for k := range f {
				v += f[k] * mix[k*cols+j]
			}
			x[t*cols+j] = float32(v)
		}
	}
	return x
}

// outErr is Σ‖X·(W − Q)ᵀ‖² over the rows of x: the layer's output error.
func outErr(x, w, q []float32, rows, cols int) float64 {
	n := len(x) / cols
	var e float64
	for t := range n {
		for r := range rows {
			var d float64
			for j := range cols {
				d += float64(x[t*cols+j]) * float64(w[r*cols+j]-q[r*cols+j])
			}
			e += d * d
		}
	}
	return e
}

// TestGPTQBeatsRTN: on correlated inputs GPTQ's output error is below
// round-to-nearest's for every codec it supports, with and without
// act-order, and its bytes are the same on every run and worker count.
func TestGPTQBeatsRTN(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	const rows, cols = 16, 256
	x := correlated(rng, 512, cols)
	g := NewGram(cols)
	g.Add(x, 512)
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	for c := tensor.Codec(0); c < tensor.NumCodecs; c++ {
		if !tensor.CanSetElem(c) {
			continue
		}
		rb, _ := c.RowBytes(cols)
		rtn := make([]byte, rows*rb)
		if err := tensor.Quantize(rtn, c, w); err != nil {
			t.Fatal(err)
		}
		qr := make([]float32, rows*cols)
		tensor.Dequantize(qr, c, rtn)
		eRTN := outErr(x, w, qr, rows, cols)
		for _, act := range []bool{false, true} {
			b, err := GPTQ(w, rows, cols, g, c, Options{ActOrder: act})
			if err != nil {
				t.Fatal(err)
			}
			qg := make([]float32, rows*cols)
			if err := tensor.Dequantize(qg, c, b); err != nil {
				t.Fatal(err)
			}
			eG := outErr(x, w, qg, rows, cols)
			t.Logf("%-8s act-order %-5v output error: gptq/rtn = %.3f", c, act, eG/eRTN)
			if !(eG < eRTN) {
				t.Errorf("%s (act-order %v): GPTQ error %.4g not below RTN's %.4g", c, act, eG, eRTN)
			}
			prev := runtime.GOMAXPROCS(1)
			b1, err := GPTQ(w, rows, cols, g, c, Options{ActOrder: act})
			runtime.GOMAXPROCS(prev)
			if err != nil || !bytes.Equal(b, b1) {
				t.Errorf("%s: GPTQ bytes differ between runs (%v)", c, err)
			}
		}
	}
}

// TestInvChol: UᵀU is the inverse of a small SPD matrix.
func TestInvChol(t *testing.T) {
	a := []float64{4, 2, 0.6, 2, 5, 1, 0.6, 1, 3}
	u, err := invChol(append([]float64(nil), a...), 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for j := range 3 {
			// (UᵀU)·a = I
			var s float64
			for k := range 3 {
				var inv float64
				for m := range 3 {
					inv += u[m*3+i] * u[m*3+k]
				}
				s += inv * a[k*3+j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-12 {
				t.Fatalf("(UᵀU·a)[%d][%d] = %g", i, j, s)
			}
		}
	}
}

// TestGPTQFileReproducible: calibrating a synthetic llama and writing it
// with GPTQ twice (once on one worker) gives byte-identical CMF files, whose
// matrices are in the codec.
func TestGPTQFileReproducible(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "f32.gguf")
	shape := synth.Shape{Name: "g", Arch: "llama", Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 256,
		Vocab: 128, RopeTheta: 10000, Context: 64}
	if err := synth.Write(src, shape, tensor.F32); err != nil {
		t.Fatal(err)
	}
	m, err := importer.Open(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := make([]int, 96)
	for i := range ids {
		ids[i] = (i*37 + 11) % shape.Vocab
	}
	for _, c := range []tensor.Codec{tensor.Q4TP, tensor.Q2TP, tensor.Q4_0} {
		var files [2][]byte
		for k := range files {
			procs := runtime.GOMAXPROCS(0)
			if k == 1 {
				procs = runtime.GOMAXPROCS(1)
			}
			grams, err := Calibrate(m, ids, 48)
			if err != nil {
				t.Fatal(err)
			}
			if len(grams) != 2*7+1 { // 7 matrices a layer and the head
				t.Errorf("calibrated %d weights, want 15", len(grams))
			}
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.cmf", c, k))
			opts := writer.SaveOptions{Quant: c, Encode: Quantizer(grams, c, Options{ActOrder: true})}
			err = writer.SaveCMF(m, p, opts)
			runtime.GOMAXPROCS(procs)
			if err != nil {
				t.Fatal(err)
			}
			if files[k], err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(files[0], files[1]) {
			t.Errorf("%s: two GPTQ imports of the same model and text differ", c)
		}
	}
}

package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// TestPadHeadsCPU: the padded model (heads of 8 or 16 dims widened to 32
// with zeros) computes the same logits as the model on the CPU backend:
// the padding is exact math, checked without a GPU.
func TestPadHeadsCPU(t *testing.T) {
	shared := fixtures.Dir(t)
	// qwen3's q/k norms have no 1+w: the CPU's own epsilon on the
	// pre-scaled weight differs from the adjusted one by ~eps (gemma3's
	// 1+w norms the CPU cannot take padded: TestPadNorm checks that math).
	for _, p := range []string{"fixtures/tiny/llama", "fixtures/tiny/mistral_sw8", "fixtures/tiny/phi3", "fixtures/tiny/gemma2",
		"fixtures/tiny/qwen3", "fixtures/tiny/granite", "fixtures/models/stories260K.gguf"} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			path := filepath.Join(shared, p)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("no %s", path)
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			pm, pads, err := padHeads(m)
			if err != nil {
				t.Fatal(err)
			}
			if !pads[0].padded() || pm.Arch.Layers[0].Attn.HeadDim != minHeadDim {
				t.Fatalf("not padded: %+v", pads[0])
			}
			logits := func(m *model.Model) []float32 {
				b, err := cpu.New(m, cpu.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				s, _ := b.NewSession(32)
				out, err := s.Forward([]int{1, 17, 33, 101, 7, 250, 64, 3, 9, 12, 5}, true)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			want, got := logits(m), logits(pm)
			var d float64
			for i := range want {
				d = max(d, math.Abs(float64(got[i]-want[i])))
			}
			t.Logf("max |Δlogit| padded vs not: %.2e", d)
			if d > 1e-4 {
				t.Errorf("padded heads change the logits by %.3g", d)
			}
		})
	}
}

// TestPadNorm: a q/k norm over a padded head, with the pre-scaled weight
// and epsilon padHeads and the layer use, equals the norm over the real
// dims (per head and full, with and without Gemma's 1+w).
func TestPadNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const eps = 1e-6
	p := headPad{hd: 16, dev: 32}
	for _, full := range []bool{false, true} {
		for _, plusOne := range []bool{false, true} {
			heads := 1
			if full {
				heads = 3
			}
			n := heads * p.hd
			x, w := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], w[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			wt := &tensor.Tensor{Name: "w", Codec: tensor.F32, Shape: []int{n}, Data: f32bytes(w)}
			pw, err := padNorm(wt, heads, p, full, plusOne)
			if err != nil {
				t.Fatal(err)
			}
			wp := make([]float32, heads*p.dev)
			tensor.Dequantize(wp, tensor.F32, pw.Data)
			xp := make([]float32, heads*p.dev)
			for h := range heads {
				copy(xp[h*p.dev:], x[h*p.hd:(h+1)*p.hd])
			}
			want := rms(x, w, eps, plusOne)
			got := rms(xp, wp, eps*float64(p.hd)/float64(p.dev), false)
			for h := range heads {
				for d := range p.hd {
					if diff := math.Abs(float64(got[h*p.dev+d] - want[h*p.hd+d])); diff > 1e-5 {
						t.Fatalf("full %v plusOne %v: dim %d: %v vs %v", full, plusOne, d, got[h*p.dev+d], want[h*p.hd+d])
					}
				}
			}
		}
	}
}

func rms(x, w []float32, eps float64, plusOne bool) []float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float32, len(x))
	for i, v := range x {
		ww := w[i]
		if plusOne {
			ww++
		}
		out[i] = float32(float64(v)*inv) * ww
	}
	return out
}

func f32bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		u := math.Float32bits(v)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

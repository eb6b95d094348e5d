package cpu

import (
	"math"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// quantWeights serves a model's weights with every matrix whose rows split
// into 32-blocks quantized to one codec.
type quantWeights struct {
	model.Weights
	c tensor.Codec
}

func (q quantWeights) Tensor(name string) (*tensor.Tensor, bool) {
	t, ok := q.Weights.Tensor(name)
	if !ok || len(t.Shape) != 2 || t.Shape[1]%32 != 0 || t.Codec != tensor.F32 {
		return t, ok
	}
	f := make([]float32, t.Elements())
	if err := tensor.Dequantize(f, t.Codec, t.Data); err != nil {
		return nil, false
	}
	n, _ := tensor.ByteLen(q.c, t.Shape)
	data := make([]byte, n)
	if err := tensor.Quantize(data, q.c, f); err != nil {
		return nil, false
	}
	return &tensor.Tensor{Name: t.Name, Codec: q.c, Shape: t.Shape, Data: data}, true
}

// TestInt8Decode bounds what the kernels' Int8 mode (the default) does to
// decode logits of a q8_0 and a q4_0 model: token-by-token logits against
// the Exact mode, relative to the logits' spread. Rounding activations to
// int8 per 32-block is the same relative step as q8_0 rounds weights by,
// and the untrained fixture amplifies it layer by layer the same way
// (cmd/native's TestQuantizedImportError): measured 2.0% (q8_0) and 2.3%
// (q4_0) RMS, max 10-11% of the std; the limits are q8_0's import limits.
//
// It runs at every kernel level the CPU has (forced with SetLevel): the
// AVX512VNNI level decodes on packed tiles and prefills with int8 GEMMs.
func TestInt8Decode(t *testing.T) {
	m, ref := loadFixture(t, "llama")
	defer kernel.SetLevel(kernel.CurrentLevel())
	for _, l := range kernel.Levels() {
		if l > kernel.Detected() {
			break
		}
		kernel.SetLevel(l)
		t.Run(l.String(), func(t *testing.T) { testInt8Decode(t, m, ref) })
	}
}

func testInt8Decode(t *testing.T, m *model.Model, ref *fixtures.Reference) {
	for _, c := range []tensor.Codec{tensor.Q8_0, tensor.Q4_0} {
		qm := *m
		qm.Weights = quantWeights{m.Weights, c}
		b, err := New(&qm, Options{})
		if err != nil {
			t.Fatal(err)
		}
		decode := func(mode kernel.Mode) []float32 {
			defer kernel.SetMode(kernel.SetMode(mode))
			s, _ := b.NewSession(len(ref.InputIDs))
			var all []float32
			for _, id := range ref.InputIDs {
				lg, err := s.Forward([]int{id}, false)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, lg...)
			}
			return all
		}
		// Prefill: all tokens in one Forward (MatMul; int8 GEMMs at the
		// AVX512VNNI level), every position's logits.
		prefill := func(mode kernel.Mode) []float32 {
			defer kernel.SetMode(kernel.SetMode(mode))
			s, _ := b.NewSession(len(ref.InputIDs))
			lg, err := s.Forward(ref.InputIDs, true)
			if err != nil {
				t.Fatal(err)
			}
			return lg
		}
		check := func(what string, exact, int8 []float32) {
			var mean, sq, errSq, errMax float64
			for _, v := range exact {
				mean += float64(v)
			}
			mean /= float64(len(exact))
			for i, v := range exact {
				sq += (float64(v) - mean) * (float64(v) - mean)
				e := float64(int8[i] - v)
				errSq += e * e
				errMax = max(errMax, math.Abs(e))
			}
			std := math.Sqrt(sq / float64(len(exact)))
			rms := math.Sqrt(errSq/float64(len(exact))) / std
			t.Logf("%s: int8 vs exact %s logits: RMS %.2e×std, max %.2e×std", c, what, rms, errMax/std)
			if rms > 0.05 || errMax/std > 0.3 {
				t.Errorf("%s: int8 mode %s error RMS %.3g, max %.3g of the logit std", c, what, rms, errMax/std)
			}
		}
		check("prefill", prefill(kernel.Exact), prefill(kernel.Int8))
		check("decode", decode(kernel.Exact), decode(kernel.Int8))
	}
}

package webgpu

import (
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// quantTol bounds device-vs-CPU logits on identical quantized weights.
const quantTol = 1e-4

// quantized re-encodes every matrix of m (projections, embedding, head)
// with codec c; vectors stay float32.
func quantized(t *testing.T, m *model.Model, c tensor.Codec) *model.Model {
	t.Helper()
	w := model.MapWeights{}
	for _, name := range m.Weights.Names() {
		src, _ := m.Weights.Tensor(name)
		if len(src.Shape) < 2 {
			w[name] = src
			continue
		}
		f := make([]float32, src.Elements())
		if err := tensor.Dequantize(f, src.Codec, src.Data); err != nil {
			t.Fatal(err)
		}
		n, err := tensor.ByteLen(c, src.Shape)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data := make([]byte, n)
		if err := tensor.Quantize(data, c, f); err != nil {
			t.Fatal(err)
		}
		w[name] = &tensor.Tensor{Name: name, Codec: c, Shape: src.Shape, Data: data}
	}
	q := *m
	q.Weights = w
	q.Close = nil
	return &q
}

// TestParityQuantized runs the same quantized weights through the CPU
// reference and the device. Both decode every weight to the same float32
// value (f16 exactly; q8_0/q4_0 blocks as d·q in float32), so the only
// difference is the order of float32 additions: measured at most 1.1e-5
// absolute on these models for every codec, so quantTol (1e-4, the CPU's
// own bound against transformers) holds with a 10x margin. (K-quants cannot
// encode these 64-wide rows; their load-time conversion is covered by the
// kernel tests, where the device's q8_0 values are the reference.)
func TestParityQuantized(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"llama", "gemma2", "qwen2", "olmo2"} {
		for _, c := range []tensor.Codec{tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0} {
			t.Run(name+"/"+c.String(), func(t *testing.T) {
				m, ref := loadFixture(t, name)
				qm := quantized(t, m, c)
				cb, err := cpu.New(qm, cpu.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer cb.Close()
				cs, err := cb.NewSession(32)
				if err != nil {
					t.Fatal(err)
				}
				want, err := cs.Forward(ref.InputIDs, true)
				if err != nil {
					t.Fatal(err)
				}
				gb, err := New(qm, Options{Device: d, Chunk: 16})
				if err != nil {
					t.Fatal(err)
				}
				defer gb.Close()
				gs, err := gb.NewSession(32)
				if err != nil {
					t.Fatal(err)
				}
				defer gs.Close()
				got, err := gs.Forward(ref.InputIDs, true)
				if err != nil {
					t.Fatal(err)
				}
				diff, _ := maxAbsDiff(got, want)
				dq, _ := maxAbsDiff(want, ref.Logits)
				t.Logf("device vs cpu %.2e (cpu %s vs f32 reference %.2e)", diff, c, dq)
				checkRows(t, c.String(), got, want, m.Arch.Vocab, quantTol)
			})
		}
	}
}

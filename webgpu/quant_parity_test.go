package webgpu

import (
	"context"
	"github.com/cortiq/cortiq/cpu/kernel"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
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
		if err := tensor.DequantizeTensor(f, src); err != nil {
			t.Fatal(err)
		}
		// EncodeTensor is Quantize, plus the side field of a codec with one.
		data, side, err := tensor.EncodeTensor(c, src.Shape, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w[name] = &tensor.Tensor{Name: name, Codec: c, Shape: src.Shape, Data: data, Side: side}
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
// encode these 64-wide rows: TestParityKQuants covers them on a 256-wide
// model.)
func TestParityQuantized(t *testing.T) {
	// The device computes float32 math on the dequantized weights: compare
	// with the CPU's exact kernels, not its int8 activations.
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
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
				// One-token steps: the decode matvecs (staged for q4_0,
				// with the fused norm and gate/up activation). The CPU's
				// own one-token steps multiply quantized weights by int8
				// activations (as llama.cpp does), so the exact reference
				// is its batched pass over the whole sequence.
				seq := append(append([]int(nil), ref.InputIDs...), ref.Generated[:3]...)
				cs2, err := cb.NewSession(32)
				if err != nil {
					t.Fatal(err)
				}
				all, err := cs2.Forward(seq, true)
				if err != nil {
					t.Fatal(err)
				}
				v := m.Arch.Vocab
				for i, tok := range ref.Generated[:3] {
					got, err := gs.Forward([]int{tok}, false)
					if err != nil {
						t.Fatal(err)
					}
					row := len(ref.InputIDs) + i
					checkRows(t, c.String()+" decode", got, all[row*v:(row+1)*v], v, quantTol)
				}
			})
		}
	}
}

// TestParityKQuants runs q4_K and q6_K weights (which need rows of 256),
// read directly by the kernels: a synthetic llama of hidden 256 with every
// matrix in the codec, prefill logits of every position and decode steps
// (fused norm and gate/up) against the CPU engine on the same weights.
func TestParityKQuants(t *testing.T) {
	// The device computes float32 math on the dequantized weights: compare
	// with the CPU's exact kernels, not its int8 activations.
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	d := testDevice(t)
	path := filepath.Join(t.TempDir(), "k.gguf")
	shape := synth.Shape{Name: "k", Arch: "llama", Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 512,
		Vocab: 512, RopeTheta: 10000, Context: 64}
	if err := synth.Write(path, shape, tensor.F32); err != nil {
		t.Fatal(err)
	}
	f, err := importer.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []tensor.Codec{tensor.Q4_K, tensor.Q6_K} {
		t.Run(c.String(), func(t *testing.T) {
			m := quantized(t, f, c)
			ids := []int{1, 7, 300, 42, 511, 2, 99, 3, 250, 17}
			cb, err := cpu.New(m, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer cb.Close()
			gb, err := New(m, Options{Device: d, Chunk: 16})
			if err != nil {
				t.Fatal(err)
			}
			defer gb.Close()
			if got := gb.layers[0].down.codec; got != c {
				t.Fatalf("device holds ffn_down as %s, want %s read directly", got, c)
			}
			cs, err := cb.NewSession(32)
			if err != nil {
				t.Fatal(err)
			}
			gs, err := gb.NewSession(32)
			if err != nil {
				t.Fatal(err)
			}
			defer gs.Close()
			want, err := cs.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gs.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, "prefill", got, want, shape.Vocab, quantTol)
			for _, tok := range []int{5, 6, 7, 8} {
				want, err := cs.Forward([]int{tok}, false)
				if err != nil {
					t.Fatal(err)
				}
				got, err := gs.Forward([]int{tok}, false)
				if err != nil {
					t.Fatal(err)
				}
				checkRows(t, "decode", got, want, shape.Vocab, quantTol)
			}
		})
	}
}

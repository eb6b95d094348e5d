package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// syntheticModel builds a Llama-shaped model with random weights in codec c
// (f32, f16 or bf16), for benchmarks.
func syntheticModel(hidden, ffn, layers, heads, kvHeads, vocab int, c tensor.Codec) *model.Model {
	rng := rand.New(rand.NewPCG(1, 2))
	w := model.MapWeights{}
	add := func(name string, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		t := &tensor.Tensor{Name: name, Codec: c, Shape: shape}
		scale := float32(1 / math.Sqrt(float64(shape[len(shape)-1])))
		switch c {
		case tensor.F32:
			t.Data = make([]byte, 4*n)
			for i := range n {
				binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(float32(rng.NormFloat64())*scale))
			}
		default:
			t.Data = make([]byte, 2*n)
			for i := range n {
				v := float32(rng.NormFloat64()) * scale
				h := tensor.F32ToBF16(v)
				if c == tensor.F16 {
					h = tensor.F32ToF16(v)
				}
				binary.LittleEndian.PutUint16(t.Data[2*i:], h)
			}
		}
		w[name] = t
	}
	hd := hidden / heads
	a := model.Arch{Family: "llama", Vocab: vocab, Hidden: hidden, Context: 4096, NormEps: 1e-5, Norm: model.NormRMS,
		Act: model.ActSiLU, EmbedScale: 1, ResidualScale: 1, LogitScale: 1, BOS: 1}
	add(model.TokenEmbd, vocab, hidden)
	add(model.Output, vocab, hidden)
	add(model.OutputNorm, hidden)
	for i := range layers {
		a.Layers = append(a.Layers, model.Layer{
			Mixer: model.MixerAttention,
			Attn: &model.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))),
				Rope: model.Rope{Theta: 10000, Dims: hd, Style: model.RopeNeoX}},
			FFN: model.FFNDense, FFNHidden: ffn, PreMixerNorm: true, PreFFNNorm: true,
		})
		n := func(s string) string { return model.LayerTensor(i, s) }
		add(n(model.AttnNorm), hidden)
		add(n(model.FFNNorm), hidden)
		add(n(model.AttnQ), heads*hd, hidden)
		add(n(model.AttnK), kvHeads*hd, hidden)
		add(n(model.AttnV), kvHeads*hd, hidden)
		add(n(model.AttnOut), hidden, heads*hd)
		add(n(model.FFNGate), ffn, hidden)
		add(n(model.FFNUp), ffn, hidden)
		add(n(model.FFNDown), hidden, ffn)
	}
	return &model.Model{Arch: a, Weights: w}
}

func benchModel(b *testing.B) *Backend {
	m := syntheticModel(768, 2048, 6, 12, 4, 32000, tensor.BF16)
	be, err := New(m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return be
}

func BenchmarkDecode(b *testing.B) {
	be := benchModel(b)
	s, _ := be.NewSession(b.N + 64)
	s.Forward(make([]int, 32), false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Forward([]int{i % 32000}, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

func BenchmarkPrefill128(b *testing.B) {
	be := benchModel(b)
	toks := make([]int, 128)
	for i := range toks {
		toks[i] = i * 7 % 32000
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, _ := be.NewSession(128)
		if _, err := s.Forward(toks, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*128)/b.Elapsed().Seconds(), "tok/s")
}

package webgpu

import (
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/gpu"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// TestParityHybridSplitK reruns qwen3_next (one attention layer among
// DeltaNet layers) with split-K attention over 8-position splits.
func TestParityHybridSplitK(t *testing.T) {
	splitLenOverride = 8
	defer func() { splitLenOverride = 0 }()
	parityDense(t, []string{"qwen3_next"})
}

// TestGreedyHybrid checks ForwardGreedy (the recurrent state and the
// routing advancing inside one submit) against Forward and a host argmax.
func TestGreedyHybrid(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"qwen3_moe", "lfm2", "qwen3_next"} {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			_, s := testSession(t, m, Options{Device: d, Chunk: 16}, 64)
			p := ref.InputIDs
			if _, err := s.Forward(p[:len(p)-1], false); err != nil {
				t.Fatal(err)
			}
			got, err := s.ForwardGreedy(p[len(p)-1], 12)
			if err != nil {
				t.Fatal(err)
			}
			s.Reset()
			l, err := s.Forward(p, false)
			if err != nil {
				t.Fatal(err)
			}
			var want []int
			for range 12 {
				tok := argmaxF(l)
				want = append(want, tok)
				if l, err = s.Forward([]int{tok}, false); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("greedy on device %v\nForward+argmax    %v", got, want)
			}
		})
	}
}

// quantizedWide re-encodes with codec c every matrix whose rows c can
// encode; the rest (conv taps, narrow matrices) stay as they are.
func quantizedWide(t *testing.T, m *model.Model, c tensor.Codec) *model.Model {
	t.Helper()
	w := model.MapWeights{}
	for _, name := range m.Weights.Names() {
		src, _ := m.Weights.Tensor(name)
		n, err := tensor.ByteLen(c, src.Shape)
		if len(src.Shape) < 2 || src.Cols()%32 != 0 || err != nil {
			w[name] = src
			continue
		}
		f := make([]float32, src.Elements())
		if err := tensor.Dequantize(f, src.Codec, src.Data); err != nil {
			t.Fatal(err)
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

// cpuParity runs m through the CPU reference and the device over the
// fixture's prompt, compares every position's logits and returns the
// device's.
func cpuParity(t *testing.T, m *model.Model, prompt []int, tol float64) []float32 {
	t.Helper()
	d := testDevice(t)
	cb, err := cpu.New(m, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	cs, err := cb.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cs.Forward(prompt, true)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := New(m, Options{Device: d, Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer gb.Close()
	gs, err := gb.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	got, err := gs.Forward(prompt, true)
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, "prompt", got, want, m.Arch.Vocab, tol)
	return got
}

// TestParityHybridQuantized runs quantized expert banks and mixer
// projections through the CPU reference and the device.
func TestParityHybridQuantized(t *testing.T) {
	// The device computes float32 math on the dequantized weights: compare
	// with the CPU's exact kernels, not its int8 activations.
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	for _, tc := range []struct {
		name string
		c    tensor.Codec
	}{{"qwen2_moe", tensor.Q4_0}, {"qwen2_moe", tensor.F16}, {"lfm2", tensor.Q8_0}, {"qwen3_next", tensor.Q8_0}} {
		t.Run(tc.name+"/"+tc.c.String(), func(t *testing.T) {
			m, ref := loadFixture(t, tc.name)
			cpuParity(t, quantizedWide(t, m, tc.c), ref.InputIDs, quantTol)
		})
	}
}

// TestMoERoutingVariants covers what the fixtures do not: sigmoid scoring,
// a selection bias, renormalized top-k and a routed scale (DeepSeek-V3
// style), against the CPU reference on qwen3_moe's weights.
func TestMoERoutingVariants(t *testing.T) {
	for _, v := range []struct {
		name    string
		scoring string
		bias    bool
		norm    bool
		scale   float32
	}{
		{"sigmoid+bias+norm+scale", "sigmoid", true, true, 2.5},
		{"softmax+norm", "softmax", false, true, 0},
		{"softmax+bias+scale", "softmax", true, false, 0.5},
	} {
		t.Run(v.name, func(t *testing.T) {
			m, ref := loadFixture(t, "qwen3_moe")
			q := *m
			q.Close = nil
			q.Arch.Layers = slices.Clone(m.Arch.Layers)
			w := model.MapWeights{}
			for _, n := range m.Weights.Names() {
				w[n], _ = m.Weights.Tensor(n)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range q.Arch.Layers {
				spec := *q.Arch.Layers[i].MoE
				spec.Scoring, spec.SelectBias, spec.NormTopK, spec.RoutedScale = v.scoring, v.bias, v.norm, v.scale
				q.Arch.Layers[i].MoE = &spec
				if v.bias {
					b := make([]float32, spec.Experts)
					for e := range b {
						b[e] = float32(rng.NormFloat64() * 0.3)
					}
					name := model.LayerTensor(i, model.FFNRouterBias)
					w[name] = &tensor.Tensor{Name: name, Codec: tensor.F32, Shape: []int{spec.Experts}, Data: gpu.F32Bytes(b)}
				}
			}
			q.Weights = w
			got := cpuParity(t, &q, ref.InputIDs, quantTol)
			if d, _ := maxAbsDiff(got, ref.Logits); d < 1e-3 {
				t.Errorf("routing variant moved the logits by only %.2e: not exercised", d)
			}
		})
	}
}

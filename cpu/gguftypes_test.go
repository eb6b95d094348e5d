package cpu

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// ggufTypeShape is a llama small enough to quantize with every codec in a
// test (the IQ encoders search their grids) and wide enough for the
// 256-element super-blocks. Untied, so token_embd and output each carry the
// codec under test.
var ggufTypeShape = synth.Shape{Name: "t", Arch: "llama", Hidden: 256, Layers: 1, Heads: 2, KVHeads: 1, FFN: 256,
	Vocab: 256, RopeTheta: 10000, Context: 64}

// dequantizedTwin is m with every tensor decoded to float32: the weights
// the quantized file means.
func dequantizedTwin(t *testing.T, m *model.Model) *model.Model {
	t.Helper()
	w := model.MapWeights{}
	for _, name := range m.Weights.Names() {
		src, _ := m.Weights.Tensor(name)
		f := make([]float32, src.Elements())
		if err := tensor.DequantizeTensor(f, src); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data := make([]byte, 4*len(f))
		if err := tensor.Quantize(data, tensor.F32, f); err != nil {
			t.Fatal(err)
		}
		w[name] = &tensor.Tensor{Name: name, Codec: tensor.F32, Shape: src.Shape, Data: data}
	}
	f := *m
	f.Weights = w
	f.Close = nil
	return &f
}

// TestGGUFTypes writes a tiny llama GGUF in every GGUF codec and in mixes
// shaped like llama-quantize's recipes, imports it, and runs it next to its
// float32 twin (the same weights decoded): logits within 1e-4 on the exact
// CPU path, greedy tokens equal. Each file's tensors must be stored in the
// codecs the mix names (token embedding and output head included).
func TestGGUFTypes(t *testing.T) {
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	mixes := []string{"q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q5_K", "iq4_nl", "iq4_xs",
		"iq3_xxs", "iq3_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m", "tq1_0", "tq2_0", "mxfp4",
		"q2_K_mix", "q3_K_M", "q5_K_M", "iq3_M", "iq2_M", "iq1_M_mix", "mxfp4_moe"}
	if testing.Short() {
		mixes = []string{"q5_0", "q3_K_M", "iq2_M", "mxfp4_moe"}
	}
	type tcase struct {
		name, mix string
		shape     synth.Shape
	}
	var cases []tcase
	for _, m := range mixes {
		cases = append(cases, tcase{m, m, ggufTypeShape})
	}
	// Routed experts in the new codecs (gpt-oss ships MXFP4 experts).
	moe := ggufTypeShape
	moe.Experts, moe.ExpertsUsed = 4, 2
	cases = append(cases, tcase{"moe/mxfp4_moe", "mxfp4_moe", moe}, tcase{"moe/q3_K_M", "q3_K_M", moe})
	dir := t.TempDir()
	for _, tc := range cases {
		name, shape := tc.mix, tc.shape
		t.Run(tc.name, func(t *testing.T) {
			mix, err := synth.ParseMix(name)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, "/", "-")+".gguf")
			if err := synth.WriteMix(path, shape, mix); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			types := map[gguf.GGMLType]int{}
			for _, ti := range f.Tensors {
				types[ti.Type]++
			}
			f.Close()
			if c, err := tensor.ParseCodec(name); err == nil && shape.Experts == 0 {
				want, _ := gguf.TypeOf(c)
				// every matrix: one layer's 7 plus embedding and output
				if types[want] != 9 {
					t.Errorf("%d tensors of %s, want 9 (%v)", types[want], want, types)
				}
			} else if len(types) < 3 {
				t.Errorf("mix %s stored only %v", name, types)
			}
			m, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			twin := dequantizedTwin(t, m)
			ids := []int{1, 7, 200, 42, 255, 2, 99, 3}
			checkTwin(t, tc.name, m, twin, ids, 8, 32)
		})
	}
}

package webgpu

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// TestRefusesCodec: a model with a weight in a codec no device kernel
// reads (every GGUF codec has a prelude today, so a codec number past the
// known ones stands in) is refused before anything is uploaded (no adapter
// needed), with ErrUnsupported and a reason naming the tensor and the
// codec, so the engine runs it on the CPU.
func TestRefusesCodec(t *testing.T) {
	for c := tensor.Codec(0); c < tensor.NumCodecs; c++ {
		if _, err := deviceCodec(c); err != nil && c != tensor.I32 {
			t.Errorf("weight codec %s has no device codec", c)
		}
	}
	path := filepath.Join(t.TempDir(), "q4.gguf")
	shape := synth.Shape{Name: "k", Arch: "llama", Hidden: 64, Layers: 1, Heads: 2, KVHeads: 1, FFN: 128,
		Vocab: 64, RopeTheta: 10000, Context: 64}
	if err := synth.Write(path, shape, tensor.Q4_0); err != nil {
		t.Fatal(err)
	}
	f, err := importer.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := model.MapWeights{}
	for _, name := range f.Weights.Names() {
		w[name], _ = f.Weights.Tensor(name)
	}
	down := *w["blk.0.ffn_down.weight"]
	down.Codec = tensor.Codec(tensor.NumCodecs)
	w["blk.0.ffn_down.weight"] = &down
	m := *f
	m.Weights, m.Close = w, nil
	b, err := New(&m, Options{})
	if err == nil {
		b.Close()
		t.Fatal("a weight in an unknown codec was accepted")
	}
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "blk.0.ffn_down.weight") || !strings.Contains(err.Error(), tensor.Codec(tensor.NumCodecs).String()) {
		t.Errorf("error %v: want ErrUnsupported naming the tensor and its codec", err)
	}
}

// TestRefusesSwiGLUOAIDense: the clamped SwiGLU (gpt-oss) is computed only
// by the routed-expert kernels; a dense FFN asking for it is refused before
// upload with ErrUnsupported (the engine runs it on the CPU).
func TestRefusesSwiGLUOAIDense(t *testing.T) {
	m, err := importer.FromHF(fixtures.Local(t, "gpt_oss_e8"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := m.Arch
	a.Layers = append([]model.Layer(nil), a.Layers...)
	a.Layers[0].FFN, a.Layers[0].FFNHidden, a.Layers[0].MoE = model.FFNDense, 32, nil
	if err := checkArch(&a); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "swiglu_oai") {
		t.Errorf("error %v: want ErrUnsupported naming swiglu_oai", err)
	}
}

package webgpu

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
)

// TestRefusesCodec: a model with a weight in a codec no device kernel
// reads is refused before anything is uploaded (no adapter needed), with
// ErrUnsupported and a reason naming the tensor and the codec, so the
// engine runs it on the CPU.
func TestRefusesCodec(t *testing.T) {
	path := filepath.Join(t.TempDir(), "iq2.gguf")
	shape := synth.Shape{Name: "k", Arch: "llama", Hidden: 256, Layers: 1, Heads: 2, KVHeads: 1, FFN: 256,
		Vocab: 256, RopeTheta: 10000, Context: 64}
	mix, err := synth.ParseMix("iq2_M")
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteMix(path, shape, mix); err != nil {
		t.Fatal(err)
	}
	m, err := importer.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := New(m, Options{})
	if err == nil {
		b.Close()
		t.Fatal("a model with iq2_xs weights was accepted")
	}
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "iq2_xs") || !strings.Contains(err.Error(), "blk.0.") {
		t.Errorf("error %v: want ErrUnsupported naming the tensor and iq2_xs", err)
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

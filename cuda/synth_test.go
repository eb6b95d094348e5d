package cuda_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
)

// tinyShape is a small llama the kernels take (head dim 64, widths that
// are multiples of 256 for the K-quants): the hermetic model of the CPU-only
// tests and of the codec parity tests.
var tinyShape = synth.Shape{Name: "cuda-tiny", Arch: "llama", Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2,
	FFN: 512, Vocab: 512, RopeTheta: 10000, Context: 256}

// tinyQwen2 is tinyShape with qwen2's q/k/v biases.
var tinyQwen2 = synth.Shape{Name: "cuda-tiny-qwen2", Arch: "qwen2", Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2,
	FFN: 512, Vocab: 512, QKVBias: true, RopeTheta: 10000, Context: 256}

// synthModel writes tinyShape with the given mix (f32, q4_0, q4_K_M ...)
// into a temporary directory and imports it.
func synthModel(t testing.TB, mix string) *model.Model {
	t.Helper()
	return synthShape(t, tinyShape, mix)
}

func synthShape(t testing.TB, shape synth.Shape, mix string) *model.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), mix+".gguf")
	mx, err := synth.ParseMix(mix)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteMix(path, shape, mx); err != nil {
		t.Fatal(err)
	}
	m, err := importer.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m.Close != nil {
			m.Close()
		}
	})
	return m
}

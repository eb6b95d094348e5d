package cuda_test

import (
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

// synthModel writes tinyShape with the given mix (f32, q4_0, q4_K_M ...)
// into a temporary directory and imports it.
func synthModel(t testing.TB, mix string) *model.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), mix+".gguf")
	mx, err := synth.ParseMix(mix)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteMix(path, tinyShape, mx); err != nil {
		t.Fatal(err)
	}
	m, err := importer.Open(path)
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

package writer

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
)

func sharedDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "shared")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared fixtures not found at %s: %v", dir, err)
	}
	return dir
}

// TestGGUFPermutationMatchesHF: permuting HF's q/k rows as SaveGGUF does
// gives the bytes of llama.cpp's converter (stories260K in both forms).
func TestGGUFPermutationMatchesHF(t *testing.T) {
	models := filepath.Join(sharedDir(t), "fixtures", "models")
	g, err := gguf.Open(filepath.Join(models, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	hf, err := safetensors.Open(filepath.Join(models, "stories260K_hf", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	for _, c := range []struct {
		hf, gguf string
		heads    int
	}{
		{"model.layers.3.self_attn.q_proj.weight", "blk.3.attn_q.weight", 8},
		{"model.layers.3.self_attn.k_proj.weight", "blk.3.attn_k.weight", 4},
	} {
		want, err := g.Tensor(c.gguf)
		if err != nil {
			t.Fatal(err)
		}
		src, err := hf.Tensor(c.hf)
		if err != nil || src.Codec != tensor.F32 {
			t.Fatalf("%s: %v (%v)", c.hf, err, src)
		}
		p, err := ggufPermuteRows(src, c.heads)
		if err != nil {
			t.Fatal(err)
		}
		if string(p.Data) != string(want.Data) {
			t.Errorf("%s: permuted HF rows differ from the GGUF tensor", c.gguf)
		}
	}
}

package synth_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/tokenizer"
)

// A synthetic model must import, tokenize and run: it is what benchmarks
// (ours and llama.cpp's) load.
func TestSynthRuns(t *testing.T) {
	for _, shape := range []string{"tiny", "tiny-moe"} {
		for _, q := range []tensor.Codec{tensor.F32, tensor.Q8_0, tensor.Q4_0} {
			s, err := synth.ParseShape(shape)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), shape+".gguf")
			if err := synth.Write(path, s, q); err != nil {
				t.Fatal(err)
			}
			m, err := importer.Open(path)
			if err != nil {
				t.Fatalf("%s %s: %v", shape, q, err)
			}
			if m.Arch.Vocab != s.Vocab || len(m.Arch.Layers) != s.Layers || m.Arch.Hidden != s.Hidden {
				t.Fatalf("%s %s: arch %+v", shape, q, m.Arch)
			}
			tok, err := tokenizer.Load(m.Tokenizer)
			if err != nil {
				t.Fatal(err)
			}
			ids := tok.Encode("a b c", true)
			b, err := cpu.New(m, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sess, err := b.NewSession(16)
			if err != nil {
				t.Fatal(err)
			}
			logits, err := sess.Forward(ids, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range logits {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s %s: non-finite logit", shape, q)
				}
			}
			sess.Close()
			if m.Close != nil {
				m.Close()
			}
		}
	}
}

func TestUnknownShape(t *testing.T) {
	if _, err := synth.ParseShape("llama-70b"); err == nil {
		t.Fatal("unknown shape accepted")
	}
}

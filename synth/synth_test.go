package synth_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/gguf"
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
			m, err := importer.Open(context.Background(), path)
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

// TestQ4KM checks the q4_K_M recipe tensor by tensor (llama.cpp's: q6_K
// for the output, a tied embedding, and attn_v / ffn_down in the first and
// last eighth of the layers and every third between; q4_K elsewhere) and
// that the file runs.
func TestQ4KM(t *testing.T) {
	s := synth.Shape{Name: "k", Arch: "llama", Hidden: 256, Layers: 16, Heads: 4, KVHeads: 2, FFN: 512,
		Vocab: 300, Tied: true, RopeTheta: 10000, Context: 64}
	m, err := synth.ParseMix("q4_K_M")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "k.gguf")
	if err := synth.WriteMix(path, s, m); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	more := map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 14: true, 15: true}
	for _, ti := range f.Tensors {
		want := gguf.TypeQ4_K
		var l int
		switch {
		case strings.HasSuffix(ti.Name, "norm.weight"):
			want = gguf.TypeF32
		case ti.Name == "token_embd.weight":
			want = gguf.TypeQ6_K
		case strings.HasSuffix(ti.Name, "attn_v.weight"), strings.HasSuffix(ti.Name, "ffn_down.weight"):
			fmt.Sscanf(ti.Name, "blk.%d.", &l)
			if more[l] {
				want = gguf.TypeQ6_K
			}
		}
		if ti.Type != want {
			t.Errorf("%s: type %d, want %d", ti.Name, ti.Type, want)
		}
	}
	im, err := importer.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	b, err := cpu.New(im, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := b.NewSession(8)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	logits, err := sess.Forward([]int{1, 2, 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("non-finite logit")
		}
	}
}

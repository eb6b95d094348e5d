package cpu

import (
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// TestGGUFGptOss writes each tiny gpt-oss fixture as a "gpt-oss" GGUF with
// MXFP4 experts (importer.QuantizeExperts + SaveGGUF, llama.cpp's tensor
// names), reads it back and runs it next to its float32 twin (the same
// weights decoded): every logit of the prompt and of a greedy decode within
// 1e-4, greedy tokens equal. The file's experts must be MXFP4 and the
// architecture must read back as the HF one's.
func TestGGUFGptOss(t *testing.T) {
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	for _, name := range fixtures.InRepo {
		t.Run(name, func(t *testing.T) {
			dir := fixtures.Local(t, name)
			hf, err := importer.FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			q, err := importer.QuantizeExperts(hf, tensor.MXFP4)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := importer.SaveGGUF(q, path); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := f.GetString("general.architecture"); a != "gpt-oss" {
				t.Errorf("general.architecture %q, want gpt-oss", a)
			}
			mx := 0
			names := map[string]bool{}
			for _, ti := range f.Tensors {
				names[ti.Name] = true
				if c, _ := ti.Type.Codec(); c == tensor.MXFP4 {
					mx++
				}
			}
			f.Close()
			if want := 3 * len(hf.Arch.Layers); mx != want {
				t.Errorf("%d MXFP4 tensors, want %d (the expert banks)", mx, want)
			}
			for _, n := range []string{"blk.0.attn_sinks.weight", "blk.0.post_attention_norm.weight", "blk.0.ffn_gate_inp.bias",
				"blk.0.ffn_gate_exps.bias", "blk.0.ffn_up_exps.bias", "blk.0.ffn_down_exps.bias", "blk.0.attn_output.bias"} {
				if !names[n] {
					t.Errorf("file has no %s", n)
				}
			}
			m, err := importer.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if l := m.Arch.Layers; l[0].Attn.Window == 0 || l[1].Attn.Window != 0 || !l[0].Attn.Sinks || !l[0].MoE.RouterBias || !l[0].Attn.Rope.Scaling.NoTruncate {
				t.Errorf("arch read back as %+v / %+v", *l[0].Attn, *l[0].MoE)
			}
			twin := dequantizedTwin(t, m)
			ref := fixtures.LoadReference(t, dir)
			run := func(m *model.Model) (logits []float32, greedy []int) {
				b, err := New(m, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				s, err := b.NewSession(64)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				logits, err = s.Forward(ref.InputIDs, true)
				if err != nil {
					t.Fatal(err)
				}
				last := logits[len(logits)-m.Arch.Vocab:]
				for range 16 {
					tok := argmax(last)
					greedy = append(greedy, tok)
					if last, err = s.Forward([]int{tok}, false); err != nil {
						t.Fatal(err)
					}
					logits = append(logits, last...)
				}
				return logits, greedy
			}
			got, gotTok := run(m)
			want, wantTok := run(twin)
			d, at := maxAbsDiff(got, want)
			t.Logf("max |gguf mxfp4 - f32 twin| = %.2e; greedy %v", d, gotTok)
			if d > parityTol {
				t.Errorf("logit %d: %g vs twin %g (|d| %.2e > %g)", at, got[at], want[at], d, parityTol)
			}
			for i := range gotTok {
				if gotTok[i] != wantTok[i] {
					t.Fatalf("greedy tokens %v, twin %v", gotTok, wantTok)
				}
			}
		})
	}
}

// TestGGUFGptOssF32: the fixtures written as float32 "gpt-oss" GGUFs match
// transformers' reference as the HF directories do (1e-4, greedy equal):
// the GGUF reading of sinks, windows, YaRN, norms and biases is gpt-oss's.
func TestGGUFGptOssF32(t *testing.T) {
	for _, name := range fixtures.InRepo {
		t.Run(name, func(t *testing.T) {
			dir := fixtures.Local(t, name)
			hf, err := importer.FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := importer.SaveGGUF(hf, path); err != nil {
				t.Fatal(err)
			}
			m, err := importer.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkParity(t, m, fixtures.LoadReference(t, dir))
		})
	}
}

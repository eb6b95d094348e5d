package importer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/model"
)

func hfSharedDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Join(filepath.Dir(file), "..", "..", "shared")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("shared fixtures not found at %s", d)
	}
	return d
}

func TestFromHFFixtures(t *testing.T) {
	root := filepath.Join(hfSharedDir(t), "fixtures", "tiny")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			m, err := FromHF(filepath.Join(root, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Arch.Validate(); err != nil {
				t.Fatal(err)
			}
			if len(m.Arch.EOS) != 1 || m.Arch.EOS[0] != 2 || m.Arch.BOS != 1 {
				t.Errorf("bos %d eos %v", m.Arch.BOS, m.Arch.EOS)
			}
			if m.Source.Format != "hf" || len(m.Source.Files) < 2 || len(m.Source.Files[0].SHA256) != 64 {
				t.Errorf("provenance %+v", m.Source)
			}
			if testing.Verbose() {
				b, _ := json.Marshal(m.Arch.Layers[len(m.Arch.Layers)-1])
				t.Logf("%s: tied=%v embed=%v res=%v logit=%v softcap=%v last layer %s", m.Arch.Family, m.Arch.TiedEmbeddings, m.Arch.EmbedScale, m.Arch.ResidualScale, m.Arch.LogitScale, m.Arch.FinalSoftcap, b)
			}
		})
	}
}

func TestFromHFArchDetails(t *testing.T) {
	root := filepath.Join(hfSharedDir(t), "fixtures", "tiny")
	load := func(name string) *model.Model {
		m, err := FromHF(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	if a := load("gemma3_text_sw8").Arch; a.Layers[0].Attn.Window != 8 || a.Layers[3].Attn.Window != 0 ||
		a.Layers[0].Attn.Rope.Theta != 10000 || a.Layers[3].Attn.Rope.Theta != 1e6 || a.Layers[0].Attn.Scale != 1.0/16 {
		t.Errorf("gemma3_text_sw8: %+v / %+v", a.Layers[0].Attn, a.Layers[3].Attn)
	}
	if a := load("smollm3").Arch; a.Layers[3].Attn.Rope.Dims != 0 || a.Layers[2].Attn.Rope.Dims != 16 {
		t.Errorf("smollm3 NoPE layer not detected")
	}
	if a := load("lfm2").Arch; a.Layers[0].FFNHidden != 256 || a.Layers[0].Mixer != model.MixerShortConv || a.Layers[1].Mixer != model.MixerAttention {
		t.Errorf("lfm2: %+v", a.Layers[0])
	}
	if a := load("qwen2").Arch; !a.Layers[0].Attn.Bias || a.Layers[0].Attn.Window != 0 {
		t.Errorf("qwen2: %+v", a.Layers[0].Attn)
	}
	if a := load("qwen3_next").Arch; a.Layers[3].Attn.Rope.Dims != 4 || !a.Layers[3].Attn.OutputGate || a.Layers[0].Mixer != model.MixerGatedDelta || !a.Layers[0].MoE.NormTopK {
		t.Errorf("qwen3_next: %+v", a.Layers[3].Attn)
	}
	m := load("mixtral")
	if w, ok := m.Weights.Tensor("blk.1.ffn_down_exps.weight"); !ok || w.Shape[0] != 4 || w.Shape[1] != 64 || w.Shape[2] != 128 {
		t.Errorf("mixtral expert bank: %v", w)
	}
	if a := load("granite_mult").Arch; a.EmbedScale != 12 || a.ResidualScale != 0.22 || a.LogitScale != 0.125 || a.Layers[0].Attn.Scale != 0.0078125 {
		t.Errorf("granite_mult: %+v", a)
	}
}

func TestFromHFErrors(t *testing.T) {
	root := filepath.Join(hfSharedDir(t), "fixtures", "tiny", "llama")
	dir := t.TempDir()
	cfg, _ := os.ReadFile(filepath.Join(root, "config.json"))
	st, _ := os.ReadFile(filepath.Join(root, "model.safetensors"))
	os.WriteFile(filepath.Join(dir, "model.safetensors"), st, 0o644)
	var c map[string]any
	json.Unmarshal(cfg, &c)
	c["intermediate_size"] = 100
	b, _ := json.Marshal(c)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	_, err := FromHF(dir)
	if err == nil || !strings.Contains(err.Error(), "gate_proj") || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("shape mismatch error = %v", err)
	}
	c["intermediate_size"] = 128
	c["model_type"] = "bert"
	b, _ = json.Marshal(c)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	if _, err := FromHF(dir); err == nil || !strings.Contains(err.Error(), "bert") {
		t.Errorf("unsupported family error = %v", err)
	}
}

func TestOpenDispatch(t *testing.T) {
	root := filepath.Join(hfSharedDir(t), "fixtures", "tiny", "llama")
	m, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	p := filepath.Join(t.TempDir(), "junk.bin")
	os.WriteFile(p, []byte("nothing here"), 0o644)
	if _, err := Open(p); err == nil {
		t.Errorf("junk accepted")
	}
}

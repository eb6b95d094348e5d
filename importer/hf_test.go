package importer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/safetensors"
	"github.com/cortiq/cortiq/tensor"
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
	m, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	gg := filepath.Join(hfSharedDir(t), "fixtures", "models", "stories260K.gguf")
	if g, err := Open(context.Background(), gg); err != nil {
		t.Errorf("Open(%s): %v", gg, err)
	} else {
		if g.Arch.Hidden != 64 || len(g.Arch.Layers) != 5 {
			t.Errorf("stories260K.gguf: hidden %d, %d layers", g.Arch.Hidden, len(g.Arch.Layers))
		}
		g.Close()
	}
	p := filepath.Join(t.TempDir(), "junk.bin")
	os.WriteFile(p, []byte("nothing here"), 0o644)
	if _, err := Open(context.Background(), p); err == nil {
		t.Errorf("junk accepted")
	}
}

// A checkpoint split into shards with an index imports to the same weights.
func TestFromHFSharded(t *testing.T) {
	src := filepath.Join(hfSharedDir(t), "fixtures", "tiny", "qwen2_moe")
	whole, err := FromHF(src)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	shards := [2][]*tensor.Tensor{}
	index := map[string]any{"metadata": map[string]any{}, "weight_map": map[string]string{}}
	for i, n := range f.Names() {
		tt, err := f.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		shards[i%2] = append(shards[i%2], tt)
		index["weight_map"].(map[string]string)[n] = fmt.Sprintf("model-%05d-of-00002.safetensors", i%2+1)
	}
	for i, ts := range shards {
		out, _ := os.Create(filepath.Join(dir, fmt.Sprintf("model-%05d-of-00002.safetensors", i+1)))
		if err := safetensors.Write(out, ts); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	b, _ := json.Marshal(index)
	os.WriteFile(filepath.Join(dir, safetensors.IndexFile), b, 0o644)
	cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	m, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Weights.Names()) != len(whole.Weights.Names()) {
		t.Fatalf("%d weights, want %d", len(m.Weights.Names()), len(whole.Weights.Names()))
	}
	for _, n := range whole.Weights.Names() {
		a, _ := whole.Weights.Tensor(n)
		b, ok := m.Weights.Tensor(n)
		if !ok || !bytes.Equal(a.Data, b.Data) || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
			t.Errorf("%s differs", n)
		}
	}
	if len(m.Source.Files) != 4 { // config, 2 shards, index
		t.Errorf("provenance lists %d files", len(m.Source.Files))
	}
}

// rewriteFixture copies a fixture with an edited config and, optionally,
// renamed (and extra) tensors.
func rewriteFixture(t *testing.T, name string, editCfg func(map[string]any) map[string]any, rename func(string) string, extra []*tensor.Tensor) string {
	src := filepath.Join(hfSharedDir(t), "fixtures", "tiny", name)
	dir := t.TempDir()
	var c map[string]any
	b, _ := os.ReadFile(filepath.Join(src, "config.json"))
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(editCfg(c))
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := extra
	for _, n := range f.Names() {
		tt, _ := f.Tensor(n)
		if rename != nil {
			tt.Name = rename(n)
		}
		ts = append(ts, tt)
	}
	out, _ := os.Create(filepath.Join(dir, "model.safetensors"))
	defer out.Close()
	if err := safetensors.Write(out, ts); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sameModel(t *testing.T, a, b *model.Model) {
	t.Helper()
	ja, _ := json.Marshal(a.Arch)
	jb, _ := json.Marshal(b.Arch)
	if !bytes.Equal(ja, jb) {
		t.Errorf("arch differs:\n%s\n%s", ja, jb)
	}
	if len(a.Weights.Names()) != len(b.Weights.Names()) {
		t.Errorf("%d weights vs %d", len(a.Weights.Names()), len(b.Weights.Names()))
	}
	for _, n := range a.Weights.Names() {
		x, _ := a.Weights.Tensor(n)
		y, ok := b.Weights.Tensor(n)
		if !ok || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("weight %s differs", n)
		}
	}
}

// A multimodal Gemma 3 checkpoint imports as its text model.
func TestFromHFGemma3Multimodal(t *testing.T) {
	ref, err := FromHF(filepath.Join(hfSharedDir(t), "fixtures", "tiny", "gemma3_text_sw8"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	vision := &tensor.Tensor{Name: "vision_tower.vision_model.embeddings.patch_embedding.weight", Codec: tensor.F32, Shape: []int{2}, Data: make([]byte, 8)}
	dir := rewriteFixture(t, "gemma3_text_sw8", func(c map[string]any) map[string]any {
		return map[string]any{"model_type": "gemma3", "text_config": c, "eos_token_id": []int{2, 3}}
	}, func(n string) string { return "language_model." + n }, []*tensor.Tensor{vision})
	m, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sameModel(t, ref, m)
}

// LFM2's original config keys (block_ff_dim, theta, full_attn_idxs,
// tie_embedding) give the same model as the transformers ones.
func TestFromHFLFM2OriginalKeys(t *testing.T) {
	ref, err := FromHF(filepath.Join(hfSharedDir(t), "fixtures", "tiny", "lfm2"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	dir := rewriteFixture(t, "lfm2", func(c map[string]any) map[string]any {
		c["block_ff_dim"] = c["intermediate_size"]
		c["intermediate_size"] = 999
		c["theta"] = c["rope_parameters"].(map[string]any)["rope_theta"]
		delete(c, "rope_parameters")
		delete(c, "layer_types")
		c["full_attn_idxs"] = []int{1, 3}
		c["tie_embedding"] = c["tie_word_embeddings"]
		delete(c, "tie_word_embeddings")
		return c
	}, nil, nil)
	m, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sameModel(t, ref, m)
}

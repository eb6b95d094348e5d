package importer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// Numbers the forward pass cannot use (a NaN, zero or negative epsilon, a
// non-finite rope base, negative sizes) are refused at import by every
// importer, naming the file and the value: they used to give NaN logits and
// greedy decoding emitted token 0 forever.
func TestImportRefusesBadNumbers(t *testing.T) {
	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"llama.attention.layer_norm_rms_epsilon", float32(math.NaN()), "norm epsilon NaN"},
		{"llama.attention.layer_norm_rms_epsilon", float32(-1e-5), "norm epsilon -1e-05"},
		{"llama.attention.layer_norm_rms_epsilon", float32(0), "norm epsilon 0"},
		{"llama.rope.freq_base", float32(math.Inf(1)), "rope theta +Inf"},
		{"llama.rope.freq_base", float32(math.NaN()), "rope theta NaN"},
		{"llama.rope.freq_base", float32(-10000), "rope theta -10000"},
	} {
		g := ggufTinyLlama("llama")
		g.meta[c.key] = c.v
		p := g.write(t)
		_, err := FromGGUF(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("GGUF %s = %v: error %v, want one naming %s and %q", c.key, c.v, err, p, c.want)
		}
	}

	// CMF: the metadata's arch is validated when the file is opened.
	good := model.Arch{Family: "llama", Vocab: 8, Hidden: 4, Context: 16, NormEps: 1e-5, Norm: model.NormRMS,
		Act: model.ActSiLU, EmbedScale: 1, ResidualScale: 1, LogitScale: 1, BOS: -1,
		Layers: []model.Layer{{Mixer: model.MixerAttention, FFN: model.FFNDense, FFNHidden: 8, PreMixerNorm: true, PreFFNNorm: true,
			Attn: &model.Attention{Heads: 2, KVHeads: 1, HeadDim: 2, Scale: 0.7, Rope: model.Rope{Theta: 10000, Dims: 2, Style: model.RopeNeoX}}}}}
	for _, c := range []struct {
		edit func(a *model.Arch)
		want string
	}{
		{func(a *model.Arch) { a.NormEps = -1e-6 }, "norm epsilon -1e-06"},
		{func(a *model.Arch) { a.NormEps = 0 }, "norm epsilon 0"},
		// (JSON has no NaN or infinity: CMF metadata cannot carry one.)
		{func(a *model.Arch) { a.Layers[0].Attn.Scale = -0.5 }, "attention scale -0.5"},
		{func(a *model.Arch) { a.Layers[0].Attn.Rope.Scaling.Factor = -2 }, "rope scaling factor -2"},
		{func(a *model.Arch) { a.Layers[0].Attn.Rope.Theta = -1 }, "rope theta -1"},
		{func(a *model.Arch) { a.Layers[0].Attn.HeadDim = -2 }, "head dim -2"},
		{func(a *model.Arch) { a.Layers[0].FFNHidden = -8 }, "dense FFN width -8"},
		{func(a *model.Arch) { a.Layers[0].Attn.KVHeads = 0 }, "kv heads 0"},
	} {
		a := good
		a.Layers = []model.Layer{good.Layers[0]}
		at := *good.Layers[0].Attn
		a.Layers[0].Attn = &at
		c.edit(&a)
		p := filepath.Join(t.TempDir(), "bad.cmf")
		w, err := cmf.Create(p, &cmf.Metadata{Arch: a})
		if err != nil {
			t.Fatal(err)
		}
		w.WriteTensor(&tensor.Tensor{Name: model.TokenEmbd, Codec: tensor.F32, Shape: []int{8, 4}, Data: make([]byte, 128)})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, err = FromCMF(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("CMF: error %v, want one naming %s and %q", err, p, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "&{") {
			t.Errorf("CMF: error %q prints a Go struct", err)
		}
	}

	// HF config.json (JSON has no NaN: an overflowing float32 is +Inf).
	root := filepath.Join(hfSharedDir(t), "fixtures", "tiny", "llama")
	cfg, _ := os.ReadFile(filepath.Join(root, "config.json"))
	st, _ := os.ReadFile(filepath.Join(root, "model.safetensors"))
	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"rms_norm_eps", -1e-6, "norm epsilon -1e-06"},
		{"rms_norm_eps", 0, "norm epsilon 0"},
		{"rms_norm_eps", 1e39, "norm epsilon +Inf"},
		{"rope_theta", -5, "rope theta -5"},
		{"rope_theta", 0, "rope theta 0"},
		{"num_attention_heads", -4, ""},
		{"hidden_size", -16, ""},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "model.safetensors"), st, 0o644)
		var m map[string]any
		json.Unmarshal(cfg, &m)
		if rp, ok := m["rope_parameters"].(map[string]any); ok && c.key == "rope_theta" {
			rp[c.key] = c.v
		} else {
			m[c.key] = c.v
		}
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
		_, err := FromHF(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("HF %s = %v: error %v, want one naming %s and %q", c.key, c.v, err, dir, c.want)
		}
	}
}

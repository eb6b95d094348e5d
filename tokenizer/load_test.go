package tokenizer

import (
	"encoding/json"
	"github.com/cortiq/cortiq/fixtures"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
)

func TestLoadHFWithConfig(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tokenizers")
	tj, err := os.ReadFile(filepath.Join(dir, "smollm-135m.tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "smollm-135m.tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	gen := []byte(`{"bos_token_id": 0, "eos_token_id": [0, 2]}`)
	tk, err := Load(&model.TokenizerData{Kind: "hf", Files: map[string][]byte{
		"tokenizer.json": tj, "tokenizer_config.json": cfg, "generation_config.json": gen}})
	if err != nil {
		t.Fatal(err)
	}
	if tk.BOS() != 0 || tk.EOS() != 0 {
		t.Errorf("BOS, EOS = %d, %d; want 0, 0", tk.BOS(), tk.EOS())
	}
	if got := tk.EOSSet(); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("EOSSet = %v, want [0 2]", got)
	}
	if !tk.IsEOS(2) || tk.IsEOS(1) {
		t.Error("IsEOS wrong")
	}
	if !tk.IsSpecial(1) || tk.IsSpecial(100) {
		t.Error("IsSpecial wrong")
	}
	if _, ok := tk.ChatTemplate(""); ok {
		t.Error("this config has no chat template")
	}
	if id, ok := tk.ID("<|im_end|>"); !ok || id != 2 {
		t.Errorf("ID(<|im_end|>) = %d, %v", id, ok)
	}
	if got := tk.Decode(tk.Encode("<|im_start|>user\nhi<|im_end|>", false), true); got != "user\nhi" {
		t.Errorf("skip-special decode = %q", got)
	}
}

func TestChatTemplateConfig(t *testing.T) {
	tj := []byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`)
	for _, cfg := range []string{
		`{"chat_template": "{{ messages }}"}`,
		`{"chat_template": [{"name": "default", "template": "{{ messages }}"}, {"name": "tool_use", "template": "T"}]}`,
	} {
		tk, err := FromJSON(tj, []byte(cfg), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := tk.ChatTemplate(""); !ok || s != "{{ messages }}" {
			t.Errorf("%s: default template = %q, %v", cfg, s, ok)
		}
		if got := tk.Encode("abba", false); !slices.Equal(got, []int{2, 1, 0}) {
			t.Errorf("Encode(abba) = %v", got)
		}
	}
}

func TestGGUFChatTemplate(t *testing.T) {
	f, err := gguf.Open(filepath.Join(fixtures.Dir(t), "fixtures", "llama-cpp-vocab", "ggml-vocab-phi-3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := FromGGUFMetadata(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := tk.ChatTemplate(""); !ok || !strings.Contains(s, "<|user|>") {
		t.Errorf("phi-3 chat template = %q", s)
	}
	// <|user|> and <|end|> are single ids with specials parsed, and
	// llama.cpp gives Phi-3's specials rstrip (the "\n" goes) and adds
	// the SentencePiece space after a special token.
	ids := tk.Encode("<|user|>\nhi<|end|>", false)
	if want := []int{32010, 7251, 32007}; !slices.Equal(ids, want) {
		t.Errorf("Encode = %v (tokens %q), want %v", ids, tk.Tokens(ids), want)
	}
}

func TestLoadLlama2Config(t *testing.T) {
	tk := fixtureTokenizer(t, "llama2")
	if tk.BOS() != 1 || tk.EOS() != 2 {
		t.Errorf("BOS, EOS = %d, %d", tk.BOS(), tk.EOS())
	}
}

// TestGGUFJSONRoundTrip loads a GGUF vocabulary as the importer stores it
// (metadata through JSON) and checks it encodes like the typed metadata.
func TestGGUFJSONRoundTrip(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "llama-cpp-vocab")
	for _, name := range []string{"llama-spm", "gpt-2"} {
		f, err := gguf.Open(filepath.Join(dir, "ggml-vocab-"+name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		md := map[string]any{}
		for k, v := range f.Metadata {
			if strings.HasPrefix(k, "tokenizer.") {
				md[k] = v
			}
		}
		raw, err := json.Marshal(md)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		typed, err := FromGGUFMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		viaJSON, err := Load(&model.TokenizerData{Kind: "gguf", Files: map[string][]byte{"gguf_vocab.json": raw}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range loadExpected(t).Strings {
			a, b := typed.Encode(s, true), viaJSON.Encode(s, true)
			if !slices.Equal(a, b) {
				t.Errorf("%s: %q: typed %v, via JSON %v", name, s, a, b)
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(nil); err == nil {
		t.Error("nil data: no error")
	}
	if _, err := Load(&model.TokenizerData{Kind: "hf"}); err == nil {
		t.Error("missing tokenizer.json: no error")
	}
	if _, err := Load(&model.TokenizerData{Kind: "spm"}); err == nil {
		t.Error("unknown kind: no error")
	}
	if _, err := FromJSON([]byte(`{"model":{"type":"Unigram","vocab":[]}}`), nil, nil); err == nil {
		t.Error("Unigram: no error")
	}
	if _, err := FromGGUFMetadata(map[string]any{"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": []string{"a"}}); err == nil {
		t.Error("bert: no error")
	}
}

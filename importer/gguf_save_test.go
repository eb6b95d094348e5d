package importer

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// TestSaveGGUFHFTokenizer: a Hugging Face tokenizer goes into the GGUF
// file as its files and comes back from FromGGUF as the same files; a
// model without a tokenizer comes back without one.
func TestSaveGGUFHFTokenizer(t *testing.T) {
	shared := hfSharedDir(t)
	m, err := FromHF(filepath.Join(shared, "fixtures", "tiny", "llama"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	bare := filepath.Join(dir, "bare.gguf")
	if err := writer.SaveGGUF(m, bare, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	b, err := FromGGUF(bare)
	if err != nil {
		t.Fatal(err)
	}
	if b.Tokenizer != nil {
		t.Errorf("no tokenizer in, %+v out", b.Tokenizer.Kind)
	}
	b.Close()

	tok := &model.TokenizerData{Kind: "hf", Files: map[string][]byte{}}
	for name, src := range map[string]string{"tokenizer.json": "llama2.tokenizer.json", "tokenizer_config.json": "llama2.tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(shared, "fixtures", "tokenizers", src))
		if err != nil {
			t.Fatal(err)
		}
		tok.Files[name] = data
	}
	tok.Files["generation_config.json"] = []byte(`{"eos_token_id": 2}`)
	withTok := *m
	withTok.Tokenizer = tok
	p := filepath.Join(dir, "tok.gguf")
	if err := writer.SaveGGUF(&withTok, p, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	g, err := FromGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !reflect.DeepEqual(g.Tokenizer, tok) {
		t.Errorf("tokenizer came back as kind %q with %d files, want the %d files written", g.Tokenizer.Kind, len(g.Tokenizer.Files), len(tok.Files))
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if s, _ := f.GetString("tokenizer.ggml.model"); s != "no_vocab" {
		t.Errorf("tokenizer.ggml.model = %q, want no_vocab (llama.cpp has no vocabulary here)", s)
	}
}

// TestSaveGGUFQuant: --quant applies to GGUF output with writer.SaveCMF's rules,
// and leaves nothing behind when the codec has no GGUF type.
func TestSaveGGUFQuant(t *testing.T) {
	m, err := FromHF(filepath.Join(hfSharedDir(t), "fixtures", "tiny", "llama"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	p := filepath.Join(dir, "q8.gguf")
	if err := writer.SaveGGUF(m, p, writer.SaveOptions{Quant: tensor.Q8_0}); err != nil {
		t.Fatal(err)
	}
	q, err := FromGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, n := range q.Weights.Names() {
		w, _ := q.Weights.Tensor(n)
		want := tensor.Q8_0
		if len(w.Shape) < 2 {
			want = tensor.F32
		}
		if w.Codec != want {
			t.Errorf("%s is %s, want %s", n, w.Codec, want)
		}
	}
	bad := filepath.Join(dir, "tp.gguf")
	if err := writer.SaveGGUF(m, bad, writer.SaveOptions{Quant: tensor.Q4TP}); err == nil {
		t.Error("q4tp (no GGUF type) was written")
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a failed save left its file")
	}
	if _, err := os.Stat(bad + ".tmp"); err == nil {
		t.Error("a failed save left its temporary file")
	}
}

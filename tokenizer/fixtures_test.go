package tokenizer

import (
	"encoding/json"
	"github.com/cortiq/cortiq/fixtures"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/cortiq/cortiq/gguf"
)

type expectedCase struct {
	Text           string   `json:"text"`
	IDs            []int    `json:"ids"`
	Tokens         []string `json:"tokens"`
	IDsWithSpecial []int    `json:"ids_with_special"`
	Decoded        string   `json:"decoded"`
}

type expectedFile struct {
	Strings    []string `json:"strings"`
	Tokenizers map[string]struct {
		File      string         `json:"file"`
		VocabSize int            `json:"vocab_size"`
		Cases     []expectedCase `json:"cases"`
	} `json:"tokenizers"`
}

var (
	tokCacheMu sync.Mutex
	tokCache   = map[string]*Tokenizer{}
)

// fixtureTokenizer loads fixtures/tokenizers/<name>.tokenizer.json[.gz] once.
func fixtureTokenizer(t testing.TB, name string) *Tokenizer {
	t.Helper()
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tokenizers")
	tokCacheMu.Lock()
	defer tokCacheMu.Unlock()
	if tk, ok := tokCache[name]; ok {
		return tk
	}
	path := filepath.Join(dir, name+".tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		path += ".gz"
	}
	tk, err := FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tokCache[name] = tk
	return tk
}

func loadExpected(t testing.TB) *expectedFile {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "tokenizers", "expected_ids.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ef expectedFile
	if err := json.Unmarshal(data, &ef); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &ef
}

func TestExpectedIDs(t *testing.T) {
	ef := loadExpected(t)
	for name, tc := range ef.Tokenizers {
		t.Run(name, func(t *testing.T) {
			tk := fixtureTokenizer(t, name)
			if tk.VocabSize() != tc.VocabSize {
				t.Errorf("VocabSize = %d, want %d", tk.VocabSize(), tc.VocabSize)
			}
			for _, c := range tc.Cases {
				ids, toks := tk.EncodeTokens(c.Text, EncodeOptions{ParseSpecial: true})
				if !slices.Equal(ids, c.IDs) && !(len(ids) == 0 && len(c.IDs) == 0) {
					t.Errorf("Encode(%q) = %v, want %v", c.Text, ids, c.IDs)
				}
				if !slices.Equal(ids, tk.Encode(c.Text, false)) {
					t.Errorf("EncodeTokens and Encode disagree on %q", c.Text)
				}
				if !slices.Equal(toks, c.Tokens) && len(c.Tokens) > 0 {
					t.Errorf("Tokens(%q) = %q, want %q", c.Text, toks, c.Tokens)
				}
				ws := tk.Encode(c.Text, true)
				if !slices.Equal(ws, c.IDsWithSpecial) && !(len(ws) == 0 && len(c.IDsWithSpecial) == 0) {
					t.Errorf("Encode(%q, special) = %v, want %v", c.Text, ws, c.IDsWithSpecial)
				}
				if got := tk.Decode(c.IDs, false); got != c.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
				}
				checkStream(t, tk, c.IDsWithSpecial, false)
				checkStream(t, tk, c.IDsWithSpecial, true)
			}
		})
	}
}

// checkStream verifies that streaming decode matches Decode and emits
// only valid UTF-8.
func checkStream(t *testing.T, tk *Tokenizer, ids []int, skip bool) {
	t.Helper()
	d := tk.NewStreamDecoderSkip(skip)
	var b strings.Builder
	for _, id := range ids {
		p := d.Next(id)
		if !utf8.ValidString(p) {
			t.Errorf("stream piece %q for id %d is not valid UTF-8", p, id)
		}
		b.WriteString(p)
	}
	b.WriteString(d.Flush())
	if want := tk.Decode(ids, skip); b.String() != want {
		t.Errorf("stream decode of %v (skip=%v) = %q, want %q", ids, skip, b.String(), want)
	}
}

// llamaCppCases reads a .inp/.out pair of llama.cpp's tokenizer tests.
func llamaCppCases(t *testing.T, base string) (texts []string, want [][]int) {
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	texts = strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	lines := strings.Split(string(out), "\n")
	if n := len(texts); n > 0 && texts[n-1] == "" {
		texts = texts[:n-1]
	}
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if len(texts) != len(lines) {
		t.Fatalf("%s: %d texts but %d id lines", base, len(texts), len(lines))
	}
	for _, l := range lines {
		var ids []int
		for _, f := range strings.Fields(l) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out: %v", base, err)
			}
			ids = append(ids, v)
		}
		want = append(want, ids)
	}
	return texts, want
}

func TestLlamaCppVocab(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "llama-cpp-vocab")
	for _, name := range []string{"llama-spm", "phi-3", "gpt-2", "llama-bpe", "deepseek-llm", "falcon", "mpt", "bert-bge"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
			var tk *Tokenizer
			switch name {
			case "llama-bpe":
				tk = fixtureTokenizer(t, "llama3")
			case "bert-bge":
				t.Skip("bert-bge is a WordPiece (WPM) vocabulary; WPM is out of scope")
			default:
				f, err := gguf.Open(base)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				tk, err = FromGGUFMetadata(f.Metadata)
				if err != nil {
					t.Fatal(err)
				}
			}
			texts, want := llamaCppCases(t, base)
			for i, text := range texts {
				got := tk.EncodeWith(text, EncodeOptions{})
				if !slices.Equal(got, want[i]) && !(len(got) == 0 && len(want[i]) == 0) {
					t.Errorf("%q:\n got %v\nwant %v", text, got, want[i])
				}
				checkStream(t, tk, got, false)
			}
		})
	}
}

func TestStories260K(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := FromGGUFMetadata(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != 512 {
		t.Errorf("VocabSize = %d, want 512", tk.VocabSize())
	}
	got := tk.Encode("Once upon a time", true)
	if want := []int{1, 403, 407, 261, 378}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if s := tk.Decode(got, true); s != "Once upon a time" {
		t.Errorf("Decode = %q", s)
	}
}

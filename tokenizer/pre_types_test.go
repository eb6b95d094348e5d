package tokenizer

import (
	"github.com/cortiq/cortiq/fixtures"
	"path/filepath"
	"slices"
	"testing"
)

// TestGGUFPreTypesCompile compiles every pre-tokenizer llama.cpp type we
// map and splits a sample without losing text.
func TestGGUFPreTypesCompile(t *testing.T) {
	sample := "Hello World's CamelCase 12345 日本語 \n\n  x!!? 'RE ünïcödé"
	for name, regexes := range ggufPreRegexes {
		var seq preSequence
		for _, r := range regexes {
			m, err := compilePattern(r)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			seq = append(seq, &preSplit{m: m, beh: splitIsolated})
		}
		words := preTokenize(seq, sample)
		joined := ""
		for _, w := range words {
			joined += w
		}
		if joined != sample {
			t.Errorf("%s: pieces %q do not cover the input", name, words)
		}
	}
	got := preTokenize(preSequence{mustSplit(t, ggufPreRegexes["tekken"][0])}, "HelloWorld CamelCase")
	if want := []string{"Hello", "World", " Camel", "Case"}; !slices.Equal(got, want) {
		t.Errorf("tekken split %q, want %q", got, want)
	}
}

func mustSplit(t *testing.T, pat string) *preSplit {
	m, err := compilePattern(pat)
	if err != nil {
		t.Fatal(err)
	}
	return &preSplit{m: m, beh: splitIsolated}
}

// TestGPTNeoXVocab: llama.cpp ships no .inp/.out for this vocabulary, so
// only loading and the byte-level round trip are checked.
func TestGPTNeoXVocab(t *testing.T) {
	tk, err := FromGGUFFile(filepath.Join(fixtures.Dir(t), "fixtures", "llama-cpp-vocab", "ggml-vocab-gpt-neox.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range loadExpected(t).Strings {
		ids := tk.EncodeWith(s, EncodeOptions{})
		if got := tk.Decode(ids, false); got != s {
			t.Errorf("round trip of %q: %q", s, got)
		}
	}
}

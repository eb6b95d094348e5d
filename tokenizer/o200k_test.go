package tokenizer

import (
	"slices"
	"testing"
)

// o200kPattern is the Split regex of o200k_base's tokenizer.json (gpt-oss,
// gpt-4o), as tiktoken writes it.
const o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// TestO200kPreTokenizer: o200k's pre-tokenizer regex (case-split words,
// case-insensitive contractions, digits in threes, "/" kept after
// punctuation) needs nothing new: the generic regex path compiles it and
// splits as tiktoken does.
func TestO200kPreTokenizer(t *testing.T) {
	m, err := compilePattern(o200kPattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Hello world's 12345", []string{"Hello", " world's", " ", "123", "45"}},
		{"HelloWorld DON'T", []string{"Hello", "World", " DON'T"}},
		{"a//b\n\n  c", []string{"a", "//", "b", "\n\n", " ", " c"}},
	} {
		var got []string
		for _, r := range m.findAll(c.in, nil) {
			got = append(got, c.in[r[0]:r[1]])
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: pieces %q, want %q", c.in, got, c.want)
		}
	}
}

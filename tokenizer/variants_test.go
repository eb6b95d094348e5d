package tokenizer

import (
	"encoding/json"
	"github.com/cortiq/cortiq/fixtures"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRegexFallbackMatchesScanner encodes the fixture strings with the
// hand scanners disabled: the general regex path must give the same ids.
func TestRegexFallbackMatchesScanner(t *testing.T) {
	ef := loadExpected(t)
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tokenizers")
	disableScanners = true
	defer func() { disableScanners = false }()
	for _, name := range []string{"gpt2", "smollm-135m"} {
		tk, err := FromFile(filepath.Join(dir, name+".tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ef.Tokenizers[name].Cases {
			if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDs) && len(c.IDs) > 0 {
				t.Errorf("%s (regex path): Encode(%q) = %v, want %v", name, c.Text, got, c.IDs)
			}
		}
	}
}

// TestLegacyMetaspace rewrites the Llama-2 tokenizer.json into the older
// layout (no normalizer, a Metaspace pre-tokenizer and decoder) that many
// hub files still use; the ids must not change.
func TestLegacyMetaspace(t *testing.T) {
	ef := loadExpected(t)
	path := filepath.Join(fixtures.Dir(t), "fixtures", "tokenizers", "llama2.tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["normalizer"] = json.RawMessage(`null`)
	doc["pre_tokenizer"] = json.RawMessage(`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`)
	// Added tokens are matched in the raw text here.
	doc["added_tokens"] = json.RawMessage(`[{"id":0,"content":"<unk>","special":true,"normalized":false},
		{"id":1,"content":"<s>","special":true,"normalized":false},{"id":2,"content":"</s>","special":true,"normalized":false}]`)
	legacy, _ := json.Marshal(doc)
	tk, err := FromJSON(legacy, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ef.Tokenizers["llama2"].Cases {
		if strings.HasPrefix(c.Text, " ") {
			// Metaspace adds no "▁" before a leading space (the
			// reason Llama moved to the Prepend normalizer).
			continue
		}
		got := tk.Encode(c.Text, false)
		want := c.IDs
		if c.Text == "<s>literal special</s>" {
			// Raw matching also finds </s> here.
			want = []int{1, 20889, 284, 4266, 2}
		}
		if !slices.Equal(got, want) && len(want) > 0 {
			t.Errorf("Encode(%q) = %v, want %v", c.Text, got, want)
		}
		if d := tk.Decode(want, false); d != c.Decoded && c.Text != "<s>literal special</s>" {
			t.Errorf("Decode(%v) = %q, want %q", want, d, c.Decoded)
		}
	}
}

func TestAddedTokenFlags(t *testing.T) {
	tj := `{"added_tokens":[
		{"id":10,"content":"<L>","special":true,"lstrip":true},
		{"id":11,"content":"<R>","special":true,"rstrip":true},
		{"id":12,"content":"word","special":false,"single_word":true},
		{"id":13,"content":"<nonspecial>","special":false}],
		"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
		"decoder":{"type":"ByteLevel"},
		"model":{"type":"BPE","vocab":{"a":0,"b":1,"Ġ":2,"w":3,"o":4,"r":5,"d":6,"Ġa":7},"merges":["Ġ a"]}}`
	tk, err := FromJSON([]byte(tj), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text string
		opts EncodeOptions
		want []int
		toks []string
	}{
		{"a <L>b", EncodeOptions{ParseSpecial: true}, []int{0, 10, 1}, []string{"a", " <L>", "b"}},
		{"a<R> b", EncodeOptions{ParseSpecial: true}, []int{0, 11, 1}, []string{"a", "<R> ", "b"}},
		{"a word b", EncodeOptions{ParseSpecial: true}, []int{0, 2, 12, 2, 1}, nil},
		{"awordb", EncodeOptions{ParseSpecial: true}, []int{0, 3, 4, 5, 6, 1}, nil},
		{"a <L>b", EncodeOptions{}, []int{0, 2, 1}, nil}, // specials not parsed; "<", "L", ">" are not in the vocabulary
		{"a<nonspecial>", EncodeOptions{}, []int{0, 13}, nil},
	}
	for _, c := range cases {
		ids, toks := tk.EncodeTokens(c.text, c.opts)
		if !slices.Equal(ids, c.want) {
			t.Errorf("%q %+v: ids %v, want %v", c.text, c.opts, ids, c.want)
		}
		if c.toks != nil && !slices.Equal(toks, c.toks) {
			t.Errorf("%q: tokens %q, want %q", c.text, toks, c.toks)
		}
	}
	if got := tk.Decode([]int{0, 10, 1, 13}, true); got != "ab<nonspecial>" {
		t.Errorf("Decode skip special = %q", got)
	}
}

func TestConcurrentEncode(t *testing.T) {
	ef := loadExpected(t)
	tk := fixtureTokenizer(t, "gpt2")
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for _, c := range ef.Tokenizers["gpt2"].Cases {
				if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDs) && len(c.IDs) > 0 {
					t.Errorf("Encode(%q) = %v", c.Text, got)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func TestStreamDecoderPieces(t *testing.T) {
	tk := fixtureTokenizer(t, "llama2")
	ids := tk.Encode("Hi 😀!", true) // <s> ▁Hi ▁ <0xF0> <0x9F> <0x98> <0x80> !
	d := tk.NewStreamDecoderSkip(true)
	var pieces []string
	for _, id := range ids {
		pieces = append(pieces, d.Next(id))
	}
	pieces = append(pieces, d.Flush())
	want := []string{"", "Hi", " ", "", "", "", "😀", "!", ""}
	if !slices.Equal(pieces, want) {
		t.Errorf("pieces %q (tokens %q), want %q", pieces, tk.Tokens(ids), want)
	}
	// An unfinished character is held back, then flushed as U+FFFD.
	d = tk.NewStreamDecoder()
	if p := d.Next(ids[3]); p != "" {
		t.Errorf("partial byte emitted %q", p)
	}
	if p := d.Flush(); p != "\uFFFD" {
		t.Errorf("Flush = %q", p)
	}
}

package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cortiq/cortiq/fixtures"
)

// continuationTokenizers loads every fixture tokenizer: the HF
// tokenizer.json files, stories260K's GGUF vocabulary and llama.cpp's
// vocabulary GGUFs (WordPiece ones excepted: WPM is out of scope).
func continuationTokenizers(t *testing.T) map[string]*Tokenizer {
	shared := fixtures.Dir(t)
	out := map[string]*Tokenizer{}
	dir := filepath.Join(shared, "fixtures", "tokenizers")
	names, _ := filepath.Glob(filepath.Join(dir, "*.tokenizer.json*"))
	for _, p := range names {
		tk, err := FromFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = tk
	}
	ggufs, _ := filepath.Glob(filepath.Join(shared, "fixtures", "llama-cpp-vocab", "*.gguf"))
	ggufs = append(ggufs, filepath.Join(shared, "fixtures", "models", "stories260K.gguf"))
	for _, p := range ggufs {
		if strings.Contains(p, "bert-bge") {
			continue
		}
		tk, err := FromGGUFFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = tk
	}
	if len(out) < 5 {
		t.Fatalf("found only %d fixture tokenizers under %s", len(out), shared)
	}
	return out
}

// TestStreamContinuation: streaming the generated ids after a prompt gives
// exactly Decode(prompt+generated) minus Decode(prompt), for every fixture
// tokenizer and every split of every fixture text. (It was "there wasa
// little": the SPM rule that drops the first piece's space was applied
// to the first generated token rather than to the start of the text.)
func TestStreamContinuation(t *testing.T) {
	texts := loadExpected(t).Strings
	texts = append(texts, "Once upon a time there was a little girl", "Once upon a time", "x  y", "日本語 テキスト")
	if inp, err := os.ReadFile(filepath.Join(fixtures.Dir(t), "fixtures", "llama-cpp-vocab", "ggml-vocab-llama-spm.gguf.inp")); err == nil {
		texts = append(texts, strings.Split(string(inp), "\n__ggml_vocab_test__\n")...)
	}
	for name, tk := range continuationTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			bad := 0
			for _, text := range texts {
				ids := tk.Encode(text, true)
				for k := 1; k < len(ids); k++ {
					for _, skip := range []bool{false, true} {
						prompt, gen := ids[:k], ids[k:]
						d := tk.NewStreamDecoderAfter(prompt, skip)
						var b strings.Builder
						for _, id := range gen {
							p := d.Next(id)
							if !utf8.ValidString(p) {
								t.Errorf("piece %q is not valid UTF-8", p)
							}
							b.WriteString(p)
						}
						b.WriteString(d.Flush())
						all, head := tk.Decode(ids, skip), tk.Decode(prompt, skip)
						got := b.String()
						ok := strings.HasSuffix(all, got)
						if strings.HasPrefix(all, head) {
							ok = got == all[len(head):]
						} else if !strings.HasSuffix(head, "\uFFFD") {
							// Only a prompt ending inside a character (shown as
							// U+FFFD alone) may decode to other than a prefix.
							ok = false
						}
						if !ok && bad < 10 {
							bad++
							t.Errorf("%q split at %d (skip=%v): continuation %q; Decode(all) %q, Decode(prompt) %q",
								text, k, skip, got, all, head)
						}
					}
				}
			}
		})
	}
}

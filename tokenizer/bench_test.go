package tokenizer

import (
	"github.com/cortiq/cortiq/fixtures"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/gguf"
)

var benchWords = strings.Fields(`the of and to in is was that for it with as his on be at by had are but from
or have an they which one you were her all she there would their we him been has when who will more no if
out so said what up its about into than them can only other new some could time these two may then do first
any my now such like our over man me even most made after also did many before must through back years where
much your way well down should because each just those people how too little state good very make world still
own see men work long get here between both life being under never day same another know while last might us
great old year off come since against go came right used take three Government Mr. Dr. don't it's I'm we'll
they've 1984 2,718 3.14159 $100 (parenthesized) "quoted" e-mail self-driving naïve café résumé`)

var benchScripts = []string{
	"日本語のテキストです。", "中文测试：你好，世界！", "한국어 텍스트를 처리합니다", "Привет, мир! Как дела?",
	"مرحبا بالعالم", "नमस्ते दुनिया", "emoji 😀👍🏽🇺🇸 👨\u200d👩\u200d👧", "Ünïcödé àccents",
	"func main() {\n\tfmt.Println(\"hi\")\n}\n", "https://example.com/path?q=1&r=2#frag", "    def foo(x):\n        return x * 2\n",
	"Ελληνικά κείμενα", "ภาษาไทย", "1234567890", "\r\n\r\n",
}

// benchText builds about n bytes of deterministic text: English prose, or
// (mixed) English interleaved with other scripts, code and emoji.
func benchText(n int, mixed bool) string {
	rng := rand.New(rand.NewPCG(42, 7))
	var b strings.Builder
	b.Grow(n + 256)
	for b.Len() < n {
		if mixed && rng.IntN(4) == 0 {
			b.WriteString(benchScripts[rng.IntN(len(benchScripts))])
			b.WriteByte(' ')
			continue
		}
		words := 5 + rng.IntN(15)
		for i := range words {
			w := benchWords[rng.IntN(len(benchWords))]
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
			if i < words-1 {
				b.WriteByte(' ')
			}
		}
		switch rng.IntN(6) {
		case 0:
			b.WriteString(".\n\n")
		case 1:
			b.WriteString("? ")
		default:
			b.WriteString(". ")
		}
	}
	return b.String()
}

func benchEncode(b *testing.B, tk *Tokenizer, mixed, cold bool) {
	text := benchText(1<<20, mixed)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	// The shared build machine is busy: CPU time says more than wall
	// time there, so report throughput per CPU second too.
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		if cold {
			if tk.bpe != nil {
				tk.bpe.cache.reset()
			}
			if tk.spm != nil {
				tk.spm.cache.reset()
			}
		}
		tk.EncodeWith(text, EncodeOptions{ParseSpecial: true})
		n++
	}
	if d := cpuTime() - cpu0; d > 0 {
		b.ReportMetric(float64(n*len(text))/1e6/d.Seconds(), "MB/cpu-s")
	}
}

func (c *wordCache) reset() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}

func BenchmarkEncode(b *testing.B) {
	for _, name := range []string{"llama3", "gpt2", "llama2"} {
		tk := fixtureTokenizer(b, name)
		b.Run(name+"/english", func(b *testing.B) { benchEncode(b, tk, false, false) })
		b.Run(name+"/mixed", func(b *testing.B) { benchEncode(b, tk, true, false) })
		b.Run(name+"/english-cold", func(b *testing.B) { benchEncode(b, tk, false, true) })
		b.Run(name+"/mixed-cold", func(b *testing.B) { benchEncode(b, tk, true, true) })
	}
}

func BenchmarkEncodeGGUFSPM(b *testing.B) {
	path := filepath.Join(fixtures.Dir(b), "fixtures", "llama-cpp-vocab", "ggml-vocab-llama-spm.gguf")
	if _, err := os.Stat(path); err != nil {
		b.Skipf("%s: %v", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tk, err := FromGGUFMetadata(f.Metadata)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("english", func(b *testing.B) { benchEncode(b, tk, false, false) })
	b.Run("mixed", func(b *testing.B) { benchEncode(b, tk, true, false) })
}

func BenchmarkDecode(b *testing.B) {
	tk := fixtureTokenizer(b, "llama3")
	text := benchText(1<<20, true)
	ids := tk.Encode(text, false)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tk.Decode(ids, false)
	}
}

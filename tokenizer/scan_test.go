package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
)

// scanCorpus returns strings that exercise the pre-tokenizer patterns:
// the fixture strings, llama.cpp's test texts and random mixes of the
// character classes the patterns distinguish.
func scanCorpus(t *testing.T) []string {
	var out []string
	if d, err := filepath.Abs(filepath.Join("..", "..", "shared")); err == nil {
		if _, err := os.Stat(d); err == nil {
			out = append(out, loadExpected(t).Strings...)
			if inp, err := os.ReadFile(filepath.Join(d, "fixtures", "llama-cpp-vocab", "ggml-vocab-gpt-2.gguf.inp")); err == nil {
				out = append(out, strings.Split(string(inp), "\n__ggml_vocab_test__\n")...)
			}
		}
	}
	alphabet := []string{" ", " ", "  ", "\t", "\n", "\r", "\r\n", "a", "Z", "x", "0", "5", "123", "'", "s", "S", "ll", "LL", "re", "VE", "d",
		"!", ".", ",", "é", "日", "本", "٣", "\u00a0", "\u2003", "\u3000", "😀", "ǅ", "\u0301", "\v", "\f", "\u0085", "_", "-", "ſ"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var b strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		out = append(out, b.String())
	}
	return out
}

func TestScannersMatchRegex(t *testing.T) {
	corpus := scanCorpus(t)
	for pat, sc := range knownScanners {
		re, err := regexp2.Compile(pat, regexp2.Unicode)
		if err != nil {
			t.Fatal(err)
		}
		slow := regexp2Matcher{re}
		for _, s := range corpus {
			want := splitBy(s, slow, splitIsolated, false, nil)
			got := splitBy(s, sc, splitIsolated, false, nil)
			if !slices.Equal(got, want) {
				t.Errorf("pattern %.30q on %q:\n scanner %q\n regexp2 %q", pat, s, got, want)
				break
			}
		}
	}
}

func TestGoRegexTranslation(t *testing.T) {
	pats := []string{`\d+`, `\p{N}`, `\p{N}+`, `[\p{P}\$\+<=>\^~\|]+`, "[\r\n]", `\s?[!-/:-~！-／：-～‘-‟　-。]+`, `\s+$`, `[^\s\p{L}]+`, `\s?\p{L}+`}
	corpus := scanCorpus(t)
	for _, pat := range pats {
		m, err := compilePattern(pat)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.(goRegexMatcher); !ok {
			t.Errorf("%q: expected the Go regexp path, got %T", pat, m)
		}
		slow := regexp2Matcher{regexp2.MustCompile(pat, regexp2.Unicode)}
		for _, s := range corpus {
			if got, want := splitBy(s, m, splitIsolated, false, nil), splitBy(s, slow, splitIsolated, false, nil); !slices.Equal(got, want) {
				t.Errorf("%q on %q: go %q, regexp2 %q", pat, s, got, want)
				break
			}
		}
	}
}

// TestWordClass checks \w as Oniguruma has it (all marks are word
// characters; .NET's, hence regexp2's, leaves out spacing marks).
func TestWordClass(t *testing.T) {
	m, err := compilePattern(`\w+|[^\w\s]+`)
	if err != nil {
		t.Fatal(err)
	}
	got := splitBy("नमस्ते दुनिया, x_1!", m, splitRemoved, true, nil)
	if want := []string{"नमस्ते", "दुनिया", ",", "x_1", "!"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSplitBehaviors(t *testing.T) {
	m := literalMatcher("-")
	s := "a-b--c-"
	cases := []struct {
		beh    splitBehavior
		invert bool
		want   []string
	}{
		{splitRemoved, false, []string{"a", "b", "c"}},
		{splitIsolated, false, []string{"a", "-", "b", "-", "-", "c", "-"}},
		{splitMergedWithPrevious, false, []string{"a-", "b-", "-", "c-"}},
		{splitMergedWithNext, false, []string{"a", "-b", "-", "-c", "-"}},
		{splitContiguous, false, []string{"a", "-", "b", "--", "c", "-"}},
	}
	for _, c := range cases {
		if got := splitBy(s, m, c.beh, c.invert, nil); !slices.Equal(got, c.want) {
			t.Errorf("behavior %d: got %q, want %q", c.beh, got, c.want)
		}
	}
}

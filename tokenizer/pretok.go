package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// matcher finds the non-overlapping matches of a split pattern.
type matcher interface {
	findAll(s string, dst [][2]int) [][2]int
}

type literalMatcher string

func (m literalMatcher) findAll(s string, dst [][2]int) [][2]int {
	if m == "" {
		return dst
	}
	for i := 0; ; {
		k := strings.Index(s[i:], string(m))
		if k < 0 {
			return dst
		}
		dst = append(dst, [2]int{i + k, i + k + len(m)})
		i += k + len(m)
	}
}

type goRegexMatcher struct{ re *regexp.Regexp }

func (m goRegexMatcher) findAll(s string, dst [][2]int) [][2]int {
	for _, loc := range m.re.FindAllStringIndex(s, -1) {
		if loc[1] > loc[0] {
			dst = append(dst, [2]int{loc[0], loc[1]})
		}
	}
	return dst
}

// regexp2Matcher runs patterns Go's regexp cannot (lookarounds). regexp2
// reports rune offsets; they are mapped back to byte offsets of s itself:
// an invalid byte is one U+FFFD rune of width 1 (mapping through a
// repaired copy, where U+FFFD takes 3 bytes, gave offsets past the end).
type regexp2Matcher struct{ re *regexp2.Regexp }

func (m regexp2Matcher) findAll(s string, dst [][2]int) [][2]int {
	runes := make([]rune, 0, len(s))
	// byteOff[k] is the byte offset of rune k.
	byteOff := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, r)
		byteOff = append(byteOff, i)
		i += w
	}
	byteOff = append(byteOff, len(s))
	mt, err := m.re.FindRunesMatch(runes)
	for err == nil && mt != nil {
		if mt.Length > 0 {
			dst = append(dst, [2]int{byteOff[mt.Index], byteOff[mt.Index+mt.Length]})
		}
		mt, err = m.re.FindNextMatch(mt)
	}
	return dst
}

const (
	gpt2Pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// knownScanners maps pattern spellings seen in tokenizer.json files and in
// llama.cpp to the hand-written scanner that runs them.
var knownScanners = map[string]*scanner{
	gpt2Pattern:   {kind: scanGPT2},
	llama3Pattern: {kind: scanLlama3, maxDigits: 3},
	qwen2Pattern:  {kind: scanLlama3, maxDigits: 1},
	// llama.cpp spells the case-insensitive contractions out.
	`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: {kind: scanLlama3, maxDigits: 3},
	`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:      {kind: scanLlama3, maxDigits: 1},
}

// disableScanners forces the regex path (tests compare both).
var disableScanners = false

// compilePattern returns the fastest correct matcher for an
// Oniguruma-style pattern: a hand scanner, Go's regexp (when the pattern
// has no lookaround or backreference), or regexp2.
func compilePattern(pat string) (matcher, error) {
	if sc, ok := knownScanners[pat]; ok && !disableScanners {
		return sc, nil
	}
	if goPat, ok := toGoRegex(pat); ok {
		if re, err := regexp.Compile(goPat); err == nil {
			return goRegexMatcher{re}, nil
		}
	}
	re, err := regexp2.Compile(pat, regexp2.Unicode)
	if err != nil {
		return nil, fmt.Errorf("compile pattern %q: %w", pat, err)
	}
	return regexp2Matcher{re}, nil
}

// toGoRegex translates pat to RE2 syntax when it means the same thing
// there: \s becomes the Unicode White_Space set (RE2's \s is ASCII only and
// lacks \v). Lookarounds, backreferences, possessive or atomic groups make
// it fail.
func toGoRegex(pat string) (string, bool) {
	const ws = `\t\n\v\f\r \x{85}\p{Z}`
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch c {
		case '\\':
			if i+1 >= len(pat) {
				return "", false
			}
			n := pat[i+1]
			switch {
			case n == 's':
				if inClass {
					b.WriteString(ws)
				} else {
					b.WriteString("[" + ws + "]")
				}
			case n == 'S':
				if inClass {
					return "", false
				}
				b.WriteString("[^" + ws + "]")
			case n == 'w' || n == 'd':
				// Oniguruma's are Unicode-aware; RE2's are ASCII.
				set := `\p{L}\p{M}\p{Nd}\p{Pc}`
				if n == 'd' {
					set = `\p{Nd}`
				}
				if inClass {
					b.WriteString(set)
				} else {
					b.WriteString("[" + set + "]")
				}
			case n == 'W' || n == 'D':
				if inClass {
					return "", false
				}
				if n == 'W' {
					b.WriteString(`[^\p{L}\p{M}\p{Nd}\p{Pc}]`)
				} else {
					b.WriteString(`\P{Nd}`)
				}
			case n == 'b' || n == 'B' || n == 'A' || n == 'z':
				return "", false
			case n >= '1' && n <= '9', n == 'k', n == 'G', n == 'Z' && !inClass, n == 'h', n == 'R', n == 'X':
				return "", false
			case (n == 'p' || n == 'P') && i+2 < len(pat) && pat[i+2] == '{':
				k := strings.IndexByte(pat[i:], '}')
				if k < 0 {
					return "", false
				}
				b.WriteString(pat[i : i+k+1])
				i += k
				continue
			default:
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			i++
			continue
		case '[':
			if inClass {
				if i+1 < len(pat) && pat[i+1] == ':' {
					return "", false
				}
				return "", false // nested classes (Oniguruma set ops)
			}
			inClass = true
			b.WriteByte(c)
			// A ']' or '^]' right after '[' is literal.
			if i+1 < len(pat) && pat[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(pat) && pat[i+1] == ']' {
				b.WriteString(`\]`)
				i++
			}
			continue
		case ']':
			inClass = false
		case '(':
			if !inClass && i+1 < len(pat) && pat[i+1] == '?' {
				if i+2 < len(pat) && strings.IndexByte("=!<>", pat[i+2]) >= 0 {
					return "", false
				}
			}
		case '+', '*', '?', '}':
			if !inClass && i+1 < len(pat) && pat[i+1] == '+' {
				return "", false // possessive
			}
		}
		b.WriteByte(c)
	}
	return b.String(), !inClass
}

// splitBehavior is HF's SplitDelimiterBehavior.
type splitBehavior int

const (
	splitRemoved splitBehavior = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Removed":
		return splitRemoved, nil
	case "Isolated":
		return splitIsolated, nil
	case "MergedWithPrevious":
		return splitMergedWithPrevious, nil
	case "MergedWithNext":
		return splitMergedWithNext, nil
	case "Contiguous":
		return splitContiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// splitBy splits s at the matches of m with HF's behavior semantics and
// appends the non-empty pieces to dst.
func splitBy(s string, m matcher, beh splitBehavior, invert bool, dst []string) []string {
	if s == "" {
		return dst
	}
	var stack [32][2]int
	locs := m.findAll(s, stack[:0])
	// parts: alternating (offsets, isMatch) covering s.
	type part struct {
		a, b  int
		match bool
	}
	var pstack [64]part
	parts := pstack[:0]
	prev := 0
	for _, l := range locs {
		if l[0] > prev {
			parts = append(parts, part{prev, l[0], invert})
		}
		parts = append(parts, part{l[0], l[1], !invert})
		prev = l[1]
	}
	if prev < len(s) {
		parts = append(parts, part{prev, len(s), invert})
	}
	switch beh {
	case splitIsolated:
		for _, p := range parts {
			dst = append(dst, s[p.a:p.b])
		}
	case splitRemoved:
		for _, p := range parts {
			if !p.match {
				dst = append(dst, s[p.a:p.b])
			}
		}
	case splitMergedWithPrevious:
		start := -1
		for _, p := range parts {
			if start < 0 {
				start = p.a
			}
			if p.match {
				dst = append(dst, s[start:p.b])
				start = -1
			}
		}
		if start >= 0 {
			dst = append(dst, s[start:])
		}
	case splitMergedWithNext:
		start := -1
		for _, p := range parts {
			if p.match && start >= 0 {
				dst = append(dst, s[start:p.a])
				start = -1
			}
			if start < 0 {
				start = p.a
			}
		}
		if start >= 0 {
			dst = append(dst, s[start:])
		}
	case splitContiguous:
		for k := 0; k < len(parts); {
			j := k + 1
			if parts[k].match {
				for j < len(parts) && parts[j].match {
					j++
				}
			}
			dst = append(dst, s[parts[k].a:parts[j-1].b])
			k = j
		}
	}
	return dst
}

// preTokenizer splits normalized text into words and hands each to
// yield, in order. first says s starts at the beginning of the input
// (Metaspace prepend_scheme "first").
type preTokenizer interface {
	each(s string, first bool, yield func(w string, first bool))
}

// preTokenize collects the words of s (tests and tools; Encode streams).
func preTokenize(p preTokenizer, s string) []string {
	var out []string
	p.each(s, true, func(w string, _ bool) { out = append(out, w) })
	return out
}

type preSequence []preTokenizer

func (p preSequence) each(s string, first bool, yield func(string, bool)) {
	switch len(p) {
	case 0:
		yield(s, first)
	case 1:
		p[0].each(s, first, yield)
	default:
		rest := p[1:]
		p[0].each(s, first, func(w string, f bool) { rest.each(w, f, yield) })
	}
}

type preSplit struct {
	m      matcher
	beh    splitBehavior
	invert bool
}

func (p *preSplit) each(s string, first bool, yield func(string, bool)) {
	if s == "" {
		return
	}
	if sc, ok := p.m.(*scanner); ok && p.beh == splitIsolated && !p.invert {
		// Every position starts a match: the words are the matches.
		for i := 0; i < len(s); {
			j := sc.next(s, i)
			if j <= i {
				j = i + 1
			}
			yield(s[i:j], first && i == 0)
			i = j
		}
		return
	}
	var stack [16]string
	words := splitBy(s, p.m, p.beh, p.invert, stack[:0])
	off := 0
	for _, w := range words {
		yield(w, first && off == 0)
		off += len(w)
	}
}

// preByteLevel is HF's ByteLevel pre-tokenizer. When it is the last step,
// mapping to the byte alphabet is left to the model (raw mode), which
// looks bytes up in a table instead of building mapped strings.
type preByteLevel struct {
	addPrefixSpace bool
	split          *preSplit // nil when use_regex is false
	mapBytes       bool      // false in raw mode
}

func (p *preByteLevel) each(s string, first bool, yield func(string, bool)) {
	if s == "" {
		return
	}
	if p.addPrefixSpace && s[0] != ' ' {
		s = " " + s
	}
	out := yield
	if p.mapBytes {
		out = func(w string, f bool) { yield(byteLevelEncode(w), f) }
	}
	if p.split != nil {
		p.split.each(s, first, out)
	} else {
		out(s, first)
	}
}

type preMetaspace struct {
	repl    string
	prepend string // "always", "first", "never"
	split   bool
}

func (p *preMetaspace) each(w string, first bool, yield func(string, bool)) {
	w = strings.ReplaceAll(w, " ", p.repl)
	if (p.prepend == "always" || (p.prepend == "first" && first)) && !strings.HasPrefix(w, p.repl) {
		w = p.repl + w
	}
	if !p.split {
		if w != "" {
			yield(w, first)
		}
		return
	}
	var stack [16]string
	for k, piece := range splitBy(w, literalMatcher(p.repl), splitMergedWithNext, false, stack[:0]) {
		yield(piece, first && k == 0)
	}
}

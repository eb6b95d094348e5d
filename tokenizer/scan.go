package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Hand-written scanners for the two pre-tokenizer regex families nearly
// every byte-level BPE uses. They return exactly the matches of the
// backtracking regex (tested against regexp2 in scan_test.go) at a fraction
// of the cost.
//
// GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Llama-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen2 is Llama-3 with \p{N} instead of \p{N}{1,3}.
type scanKind int

const (
	scanGPT2 scanKind = iota
	scanLlama3
)

type scanner struct {
	kind      scanKind
	maxDigits int // Llama-3 family: digits per match (3 llama3, 1 qwen2)
}

const (
	clsOther = iota
	clsLetter
	clsNumber
	clsSpace
)

// asciiClass classifies bytes < 0x80.
var asciiClass [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			asciiClass[c] = clsLetter
		case c >= '0' && c <= '9':
			asciiClass[c] = clsNumber
		case c == ' ', c >= '\t' && c <= '\r':
			asciiClass[c] = clsSpace
		default:
			asciiClass[c] = clsOther
		}
	}
}

func isSpaceRune(r rune) bool {
	// Oniguruma's and .NET's \s: the Unicode White_Space property.
	return unicode.IsSpace(r)
}

// classAt returns the class of the rune at s[i] and its width; width 0 at
// the end of s.
func classAt(s string, i int) (cls uint8, r rune, w int) {
	if i >= len(s) {
		return clsOther, 0, 0
	}
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], rune(c), 1
	}
	r, w = utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return clsLetter, r, w
	case unicode.IsNumber(r):
		return clsNumber, r, w
	case isSpaceRune(r):
		return clsSpace, r, w
	}
	return clsOther, r, w
}

// span consumes runes of class cls from i and returns the end.
func span(s string, i int, cls uint8) int {
	for i < len(s) {
		c, _, w := classAt(s, i)
		if c != cls {
			break
		}
		i += w
	}
	return i
}

// contraction matches 's 't 're 've 'm 'll 'd at s[i] (s[i] == '\”) and
// returns the match length or 0.
func contraction(s string, i int, fold bool) int {
	rest := s[i+1:]
	if len(rest) == 0 {
		return 0
	}
	low := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 32
		}
		return c
	}
	switch low(rest[0]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if len(rest) > 1 && low(rest[1]) == 'e' {
			return 3
		}
	case 'l':
		if len(rest) > 1 && low(rest[1]) == 'l' {
			return 3
		}
	}
	return 0
}

// next returns the end of the match starting at i (i < len(s)). Every
// position starts a match for these patterns.
func (sc *scanner) next(s string, i int) int {
	if sc.kind == scanGPT2 {
		return sc.nextGPT2(s, i)
	}
	return sc.nextLlama3(s, i)
}

func (sc *scanner) nextGPT2(s string, i int) int {
	c := s[i]
	if c == '\'' {
		if n := contraction(s, i, false); n > 0 {
			return i + n
		}
	}
	cls, _, w := classAt(s, i)
	start := i
	if c == ' ' {
		ncls, _, nw := classAt(s, i+1)
		if nw > 0 && ncls != clsSpace {
			cls, start = ncls, i+1
		}
	}
	switch cls {
	case clsLetter, clsNumber, clsOther:
		return span(s, start, cls)
	}
	_ = w
	return spaceRun(s, i)
}

// spaceRun implements \s+(?!\S)|\s+ at a whitespace rune.
func spaceRun(s string, i int) int {
	end := span(s, i, clsSpace)
	if end == len(s) {
		return end
	}
	// Back off one rune so the next non-space keeps a leading space.
	_, lw := utf8.DecodeLastRuneInString(s[i:end])
	if end-lw > i {
		return end - lw
	}
	return end
}

func isCRLF(c byte) bool { return c == '\r' || c == '\n' }

func (sc *scanner) nextLlama3(s string, i int) int {
	c := s[i]
	if c == '\'' {
		if n := contraction(s, i, true); n > 0 {
			return i + n
		}
	}
	cls, _, w := classAt(s, i)
	switch cls {
	case clsLetter:
		return span(s, i, clsLetter)
	case clsNumber:
		j := i
		for k := 0; k < sc.maxDigits && j < len(s); k++ {
			ncls, _, nw := classAt(s, j)
			if ncls != clsNumber {
				break
			}
			j += nw
		}
		return j
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isCRLF(c) {
		if ncls, _, nw := classAt(s, i+w); nw > 0 && ncls == clsLetter {
			return span(s, i+w, clsLetter)
		}
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	start := -1
	if cls == clsOther {
		start = i
	} else if c == ' ' {
		if ncls, _, nw := classAt(s, i+1); nw > 0 && ncls == clsOther {
			start = i + 1
		}
	}
	if start >= 0 {
		j := span(s, start, clsOther)
		for j < len(s) && isCRLF(s[j]) {
			j++
		}
		return j
	}
	// Whitespace: \s*[\r\n]+ then \s+(?!\S) then \s+.
	end := span(s, i, clsSpace)
	last := -1
	for j := i; j < end; j++ {
		if isCRLF(s[j]) {
			last = j
		}
	}
	if last >= 0 {
		return last + 1
	}
	return spaceRun(s, i)
}

// splitScan appends the matches of sc over s to dst.
func (sc *scanner) findAll(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		j := sc.next(s, i)
		if j <= i { // cannot happen; guard against an endless loop
			_, w := utf8.DecodeRuneInString(s[i:])
			j = i + w
		}
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

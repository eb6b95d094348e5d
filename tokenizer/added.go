package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token matched verbatim in the input before the model
// sees it (HF added_tokens; GGUF control and user-defined tokens).
type AddedToken struct {
	ID         int
	Content    string
	Special    bool // skipped by Decode(ids, true); matched only when parsing specials
	Normalized bool // matched in normalized text
	LStrip     bool // swallows whitespace on its left
	RStrip     bool // swallows whitespace on its right
	SingleWord bool // matches only as a whole word
}

// addedMatcher finds added tokens in text, leftmost first and longest at
// a position (aho-corasick LeftmostLongest, as HF does).
type addedMatcher struct {
	byFirst [256][]addedPattern // candidates by first byte, longest first
	n       int
}

type addedPattern struct {
	pat string
	tok *AddedToken
}

func newAddedMatcher(toks []*AddedToken, norm func(string) string) *addedMatcher {
	m := &addedMatcher{}
	for _, t := range toks {
		p := t.Content
		if norm != nil {
			p = norm(p)
		}
		if p == "" {
			continue
		}
		m.byFirst[p[0]] = append(m.byFirst[p[0]], addedPattern{p, t})
		m.n++
	}
	for _, ps := range m.byFirst {
		sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].pat) > len(ps[j].pat) })
	}
	return m
}

func (m *addedMatcher) empty() bool { return m == nil || m.n == 0 }

// piece is a stretch of input: either plain text or one added token.
type piece struct {
	text  string
	id    int // -1 for text
	first bool
}

func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }

// split cuts s at added tokens. skip reports tokens not to match (special
// tokens when specials are not parsed).
func (m *addedMatcher) split(s string, first bool, skip func(*AddedToken) bool, dst []piece) []piece {
	if m.empty() {
		return append(dst, piece{s, -1, first})
	}
	last := 0
	for i := 0; i < len(s); i++ {
		cands := m.byFirst[s[i]]
		if len(cands) == 0 {
			continue
		}
		var hit *AddedToken
		end := 0
		for _, c := range cands {
			if !strings.HasPrefix(s[i:], c.pat) || skip(c.tok) {
				continue
			}
			e := i + len(c.pat)
			if c.tok.SingleWord {
				if r, _ := utf8.DecodeLastRuneInString(s[:i]); i > 0 && isWordChar(r) {
					continue
				}
				if r, _ := utf8.DecodeRuneInString(s[e:]); e < len(s) && isWordChar(r) {
					continue
				}
			}
			hit, end = c.tok, e
			break
		}
		if hit == nil {
			continue
		}
		start := i
		if hit.LStrip {
			for start > last {
				r, w := utf8.DecodeLastRuneInString(s[last:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= w
			}
		}
		if hit.RStrip {
			for end < len(s) {
				r, w := utf8.DecodeRuneInString(s[end:])
				if !unicode.IsSpace(r) {
					break
				}
				end += w
			}
		}
		if start > last {
			dst = append(dst, piece{s[last:start], -1, first && last == 0})
		}
		dst = append(dst, piece{s[start:end], hit.ID, false})
		last = end
		i = end - 1
	}
	if last < len(s) {
		dst = append(dst, piece{s[last:], -1, first && last == 0})
	}
	return dst
}

package tokenizer

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a piece of input text before pre-tokenization.
// Offsets are not tracked: only ids and decoded text matter here.
type normalizer func(string) string

func seqNormalizer(ns []normalizer) normalizer {
	return func(s string) string {
		for _, n := range ns {
			s = n(s)
		}
		return s
	}
}

func prependNormalizer(p string) normalizer {
	return func(s string) string {
		if s == "" {
			return s
		}
		return p + s
	}
}

func replaceNormalizer(m matcher, content string) normalizer {
	if lit, ok := m.(literalMatcher); ok {
		return func(s string) string { return strings.ReplaceAll(s, string(lit), content) }
	}
	return func(s string) string {
		locs := m.findAll(s, nil)
		if len(locs) == 0 {
			return s
		}
		var b strings.Builder
		prev := 0
		for _, l := range locs {
			b.WriteString(s[prev:l[0]])
			b.WriteString(content)
			prev = l[1]
		}
		b.WriteString(s[prev:])
		return b.String()
	}
}

func stripNormalizer(left, right bool) normalizer {
	return func(s string) string {
		if left {
			s = strings.TrimLeftFunc(s, unicode.IsSpace)
		}
		if right {
			s = strings.TrimRightFunc(s, unicode.IsSpace)
		}
		return s
	}
}

func stripAccents(s string) string {
	var b strings.Builder
	for _, r := range s {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	nfcNormalizer   normalizer = norm.NFC.String
	nfdNormalizer   normalizer = norm.NFD.String
	nfkcNormalizer  normalizer = norm.NFKC.String
	nfkdNormalizer  normalizer = norm.NFKD.String
	lowerNormalizer normalizer = strings.ToLower
)

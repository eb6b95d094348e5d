package tokenizer

import "strings"

const spmSpace = "\u2581"

// canChunkAtSpace reports whether no vocabulary token has "▁" right after
// another character. Then no merge ever joins across the start of a "▁"
// run that follows other text, and a SentencePiece-style text (one long
// word) can be encoded chunk by chunk, with the word cache, giving the
// same ids as encoding it whole.
func canChunkAtSpace(vocab map[string]int) bool {
	if _, ok := vocab[spmSpace]; !ok {
		return false
	}
	for tok := range vocab {
		k := strings.Index(tok, spmSpace)
		for k >= 0 {
			if k > 0 && !strings.HasSuffix(tok[:k], spmSpace) {
				return false
			}
			next := strings.Index(tok[k+len(spmSpace):], spmSpace)
			if next < 0 {
				break
			}
			k += len(spmSpace) + next
		}
	}
	return true
}

// eachSpaceChunk calls fn for the pieces of s cut before every "▁" that
// follows a character other than "▁".
func eachSpaceChunk(s string, fn func(string)) {
	start := 0
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], spmSpace)
		if k < 0 {
			break
		}
		at := i + k
		if at > start && !strings.HasSuffix(s[start:at], spmSpace) {
			fn(s[start:at])
			start = at
		}
		i = at + len(spmSpace)
	}
	if start < len(s) {
		fn(s[start:])
	}
}

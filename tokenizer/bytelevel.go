package tokenizer

import "unicode/utf8"

// The GPT-2 byte-to-unicode table: printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100.. in byte order, so every byte
// string becomes a printable string without spaces or controls.
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
	// byteToStr[b] is string(byteToRune[b]), kept to avoid re-encoding.
	byteToStr [256]string
)

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
	}
	for b := 0; b < 256; b++ {
		runeToByte[byteToRune[b]] = byte(b)
		byteToStr[b] = string(byteToRune[b])
	}
}

// byteLevelEncode maps raw bytes to their byte-level string.
func byteLevelEncode(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteToRune[s[i]])
	}
	return string(buf)
}

// byteLevelDecode maps a byte-level string back to raw bytes. ok is false
// when some character is outside the table (an added token written as
// plain text); HF then keeps the token's own bytes.
func byteLevelDecode(s string) (raw []byte, ok bool) {
	raw = make([]byte, 0, len(s))
	for _, r := range s {
		b, found := runeToByte[r]
		if !found {
			return nil, false
		}
		raw = append(raw, b)
	}
	return raw, true
}

// appendLossy appends p to dst as valid UTF-8, replacing each maximal
// invalid subpart with U+FFFD the way Rust's String::from_utf8_lossy does
// (the rule HF decoders use).
func appendLossy(dst []byte, p []byte) []byte {
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(p[i:])
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, p[i:i+n]...)
			i += n
			continue
		}
		i += maximalSubpart(p[i:])
		dst = append(dst, "\uFFFD"...)
	}
	return dst
}

// maximalSubpart is the length (>= 1) of the longest prefix of p that is a
// prefix of some well-formed UTF-8 sequence; p starts with an invalid or
// truncated sequence.
func maximalSubpart(p []byte) int {
	c := p[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(p); k++ {
		b := p[n]
		if k == 0 {
			if b < lo || b > hi {
				return n
			}
		} else if b < 0x80 || b > 0xBF {
			return n
		}
		n++
	}
	return n
}

// incompleteTail is the length of a trailing truncated-but-so-far-valid
// UTF-8 sequence in p (0 when p ends on a boundary or with invalid bytes).
func incompleteTail(p []byte) int {
	for k := 1; k <= 3 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 {
			m := maximalSubpart(p[len(p)-k:])
			if m == k && !utf8.FullRune(p[len(p)-k:]) {
				return k
			}
			return 0
		}
	}
	return 0
}

package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Fast paths for the two big members of a tokenizer.json, the vocabulary
// object and the merges array, which encoding/json decodes several times
// slower through reflection. Any shape they do not expect makes them
// report failure and the caller falls back to encoding/json.

type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScan) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str reads a JSON string.
func (s *jsonScan) str() (string, bool) {
	if !s.eat('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			out := string(s.b[start:s.i])
			s.i++
			return out, true
		}
		if c == '\\' {
			return s.strSlow(start)
		}
		if c < 0x20 {
			return "", false
		}
		s.i++
	}
	return "", false
}

func (s *jsonScan) strSlow(start int) (string, bool) {
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if x, ok := s.hex4(); ok {
						r2 = x
					} else {
						s.i = save
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (s *jsonScan) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

func (s *jsonScan) integer() (int, bool) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && (s.b[s.i] >= '0' && s.b[s.i] <= '9' || s.b[s.i] == '-') {
		s.i++
	}
	v, err := strconv.Atoi(string(s.b[start:s.i]))
	return v, err == nil
}

func (s *jsonScan) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// parseVocab decodes {"token": id, ...}.
func parseVocab(raw []byte) (map[string]int, error) {
	if v, ok := fastVocab(raw); ok {
		return v, nil
	}
	var v map[string]int
	err := json.Unmarshal(raw, &v)
	return v, err
}

func fastVocab(raw []byte) (map[string]int, bool) {
	s := &jsonScan{b: raw}
	if !s.eat('{') {
		return nil, false
	}
	v := make(map[string]int, len(raw)/12)
	if s.eat('}') {
		return v, s.end()
	}
	for {
		k, ok := s.str()
		if !ok || !s.eat(':') {
			return nil, false
		}
		id, ok := s.integer()
		if !ok {
			return nil, false
		}
		v[k] = id
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return v, s.end()
		}
		return nil, false
	}
}

// fastMerges decodes ["a b", ...] or [["a", "b"], ...], calling add for
// each merge in order.
func fastMerges(raw []byte, add func(a, b string, rank int)) (ok bool, err error) {
	s := &jsonScan{b: raw}
	if !s.eat('[') {
		return false, nil
	}
	if s.eat(']') {
		return s.end(), nil
	}
	type pair struct{ a, b string }
	var pairs []pair
	for rank := 0; ; rank++ {
		var p pair
		switch s.peek() {
		case '"':
			str, ok := s.str()
			if !ok {
				return false, nil
			}
			a, b, ok := splitMerge(str)
			if !ok {
				return true, errorf("merge %d: %q is not two tokens", rank, str)
			}
			p = pair{a, b}
		case '[':
			s.i++
			a, ok1 := s.str()
			if !ok1 || !s.eat(',') {
				return false, nil
			}
			b, ok2 := s.str()
			if !ok2 || !s.eat(']') {
				return false, nil
			}
			p = pair{a, b}
		default:
			return false, nil
		}
		pairs = append(pairs, p)
		if s.eat(',') {
			continue
		}
		if s.eat(']') && s.end() {
			break
		}
		return false, nil
	}
	// Only apply once the whole array parsed, so a fallback starts clean.
	for rank, p := range pairs {
		add(p.a, p.b, rank)
	}
	return true, nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

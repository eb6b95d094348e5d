package chat

import (
	"strings"
)

// The engine resolves filters among its built-ins only, and its tojson
// sorts keys and escapes HTML when asked to indent. Every "x | tojson(...)"
// in a tag is therefore rewritten to a call "__tojson((x), ...)" of
// transformers' tojson, provided as a variable.

type token struct {
	s    string
	kind byte // 'i' identifier, 'n' number, 's' string, 'p' punctuation, 'w' whitespace
}

func tokenizeTag(src string) []token {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		j := i + 1
		var kind byte
		switch {
		case c == '\'' || c == '"':
			kind = 's'
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j < len(src) {
				j++
			}
			if j > len(src) {
				j = len(src)
			}
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			kind = 'i'
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
		case c >= '0' && c <= '9':
			kind = 'n'
			for j < len(src) && (src[j] == '.' || src[j] >= '0' && src[j] <= '9' || src[j] == 'e' || src[j] == '_') {
				j++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			kind = 'w'
			for j < len(src) && (src[j] == ' ' || src[j] == '\t' || src[j] == '\n' || src[j] == '\r') {
				j++
			}
		default:
			kind = 'p'
		}
		out = append(out, token{src[i:j], kind})
		i = j
	}
	return out
}

var notOperand = map[string]bool{"in": true, "not": true, "and": true, "or": true, "if": true, "else": true, "is": true, "for": true, "set": true, "elif": true, "return": true}

// prevSig is the index of the last non-whitespace token before i, or -1.
func prevSig(toks []token, i int) int {
	for i--; i >= 0 && toks[i].kind == 'w'; i-- {
	}
	return i
}

func nextSig(toks []token, i int) int {
	for i++; i < len(toks) && toks[i].kind == 'w'; i++ {
	}
	return i
}

// matchOpen finds the opener of the closer at i.
func matchOpen(toks []token, i int) int {
	depth := 0
	for k := i; k >= 0; k-- {
		switch toks[k].s {
		case ")", "]", "}":
			depth++
		case "(", "[", "{":
			depth--
			if depth == 0 {
				return k
			}
		}
	}
	return -1
}

func matchClose(toks []token, i int) int {
	depth := 0
	for k := i; k < len(toks); k++ {
		switch toks[k].s {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				return k
			}
		}
	}
	return -1
}

// operandStart returns where the filter operand ending at token end
// begins: a postfix chain (primary, .attr, [index], (call)), possibly
// itself filtered.
func operandStart(toks []token, end int) int {
	pos := end
	for pos >= 0 {
		t := toks[pos]
		switch {
		case t.s == ")" || t.s == "]" || t.s == "}":
			open := matchOpen(toks, pos)
			if open < 0 {
				return -1
			}
			p := prevSig(toks, open)
			// A call or subscript continues the chain to its left.
			if toks[open].s != "{" && p >= 0 && (toks[p].kind == 'i' && !notOperand[toks[p].s] || toks[p].s == ")" || toks[p].s == "]" || toks[p].kind == 's') {
				pos = p
				continue
			}
			pos = open
		case t.kind == 'i' && !notOperand[t.s], t.kind == 'n', t.kind == 's':
		default:
			return -1
		}
		p := prevSig(toks, pos)
		if p >= 0 && toks[p].s == "." {
			pos = prevSig(toks, p)
			continue
		}
		if p >= 0 && toks[p].s == "|" && (p == 0 || toks[p-1].s != "|") {
			pos = prevSig(toks, p)
			continue
		}
		return pos
	}
	return -1
}

// rewriteToJSON rewrites "x | tojson" and "x | tojson(args)" in tag code.
func rewriteToJSON(code string) string {
	if !strings.Contains(code, "tojson") {
		return code
	}
	toks := tokenizeTag(code)
	for changed := true; changed; {
		changed = false
		for i, t := range toks {
			if t.s != "tojson" || t.kind != 'i' {
				continue
			}
			bar := prevSig(toks, i)
			if bar < 0 || toks[bar].s != "|" {
				continue
			}
			opEnd := prevSig(toks, bar)
			start := operandStart(toks, opEnd)
			if start < 0 {
				continue
			}
			var b strings.Builder
			b.WriteString("__tojson((")
			for _, x := range toks[start : opEnd+1] {
				b.WriteString(x.s)
			}
			b.WriteString(")")
			end := i
			if n := nextSig(toks, i); n < len(toks) && toks[n].s == "(" {
				cl := matchClose(toks, n)
				if cl < 0 {
					continue
				}
				inner := ""
				for _, x := range toks[n+1 : cl] {
					inner += x.s
				}
				if strings.TrimSpace(inner) != "" {
					b.WriteString(", ")
					b.WriteString(inner)
				}
				end = cl
			}
			b.WriteString(")")
			repl := token{b.String(), 'i'}
			toks = append(toks[:start], append([]token{repl}, toks[end+1:]...)...)
			changed = true
			break
		}
	}
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.s)
	}
	return b.String()
}

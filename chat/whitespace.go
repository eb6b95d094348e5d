package chat

import (
	"fmt"
	"strings"
	"unicode"
)

type segKind int

const (
	segText    segKind = iota
	segExpr            // {{ }}
	segStmt            // {% %}
	segComment         // {# #}
)

type segment struct {
	kind        segKind
	text        string // tag content (without markers) or literal text
	left, right byte   // whitespace markers: '-', '+' or 0
	endsLine    bool   // the tag's end (with what trim_blocks took) ends in "\n"
}

// normalizeWhitespace rewrites a template so that no whitespace rule is
// left for the engine: Jinja2's lexer rules with trim_blocks and
// lstrip_blocks (as transformers sets them) are applied here, comments are
// dropped, and every piece of literal text becomes a string expression.
func normalizeWhitespace(src string) (string, error) {
	// Jinja normalizes newlines and drops one trailing newline
	// (keep_trailing_newline=False).
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")
	segs, err := lexTemplate(src)
	if err != nil {
		return "", err
	}
	for i := range segs {
		s := &segs[i]
		if s.kind == segText {
			continue
		}
		// Left side of the tag against the text just before it.
		if i > 0 && segs[i-1].kind == segText {
			p := &segs[i-1]
			switch {
			case s.left == '-':
				p.text = strings.TrimRightFunc(p.text, unicode.IsSpace)
			case s.left != '+' && s.kind != segExpr:
				// lstrip_blocks: only whitespace between the line start
				// and the tag goes.
				lpos := strings.LastIndexByte(p.text, '\n') + 1
				startsLine := lpos > 0 || i-1 == 0 || (i >= 2 && segs[i-2].endsLine)
				if startsLine && lpos < len(p.text) && strings.TrimFunc(p.text[lpos:], unicode.IsSpace) == "" {
					p.text = p.text[:lpos]
				}
			}
		}
		// Right side against the text after it.
		if i+1 < len(segs) && segs[i+1].kind == segText {
			n := &segs[i+1]
			switch {
			case s.right == '-':
				before := n.text
				n.text = strings.TrimLeftFunc(n.text, unicode.IsSpace)
				s.endsLine = strings.HasSuffix(before[:len(before)-len(n.text)], "\n")
			case s.right != '+' && s.kind != segExpr && strings.HasPrefix(n.text, "\n"):
				n.text = n.text[1:] // trim_blocks
				s.endsLine = true
			}
		}
	}
	var b strings.Builder
	for _, s := range segs {
		switch s.kind {
		case segText:
			if s.text != "" {
				b.WriteString("{{ '")
				b.WriteString(quoteLiteral(s.text))
				b.WriteString("' }}")
			}
		case segExpr:
			b.WriteString("{{")
			b.WriteString(rewriteToJSON(s.text))
			b.WriteString("}}")
		case segStmt:
			switch strings.TrimSpace(s.text) {
			case "generation", "endgeneration":
				// transformers' AssistantTracker markers: content renders as is.
				continue
			}
			b.WriteString("{%")
			b.WriteString(rewriteToJSON(s.text))
			b.WriteString("%}")
		}
	}
	return b.String(), nil
}

func quoteLiteral(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\t", `\t`)
	return r.Replace(s)
}

// lexTemplate splits src into text and tags the way Jinja2's lexer does:
// tags end at the first closer outside a string literal; {% raw %} blocks
// are text.
func lexTemplate(src string) ([]segment, error) {
	var segs []segment
	addText := func(t string) {
		if t == "" {
			return
		}
		if n := len(segs); n > 0 && segs[n-1].kind == segText {
			segs[n-1].text += t
			return
		}
		segs = append(segs, segment{kind: segText, text: t})
	}
	i := 0
	for i < len(src) {
		k := indexTagOpen(src, i)
		if k < 0 {
			addText(src[i:])
			break
		}
		addText(src[i:k])
		var kind segKind
		var closer string
		switch src[k+1] {
		case '{':
			kind, closer = segExpr, "}}"
		case '%':
			kind, closer = segStmt, "%}"
		default:
			kind, closer = segComment, "#}"
		}
		j := k + 2
		var left byte
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			left = src[j]
			j++
		}
		end, err := findCloser(src, j, closer, kind != segComment)
		if err != nil {
			return nil, fmt.Errorf("at byte %d: %w", k, err)
		}
		content := src[j:end]
		var right byte
		if n := len(content); n > 0 && (content[n-1] == '-' || content[n-1] == '+') {
			right = content[n-1]
			content = content[:n-1]
		}
		seg := segment{kind: kind, text: content, left: left, right: right}
		i = end + 2
		if kind == segStmt && strings.TrimSpace(content) == "raw" {
			// Everything up to {% endraw %} is literal text.
			rawEnd, tagEnd, endLeft, endRight, ok := findEndRaw(src, i)
			if !ok {
				return nil, fmt.Errorf("at byte %d: unclosed {%% raw %%}", k)
			}
			// Keep the raw tags as empty statements so their
			// whitespace markers still apply, then drop them.
			segs = append(segs, segment{kind: segComment, left: left, right: right})
			addText(src[i:rawEnd])
			segs = append(segs, segment{kind: segComment, left: endLeft, right: endRight})
			i = tagEnd
			continue
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

func indexTagOpen(src string, from int) int {
	for i := from; i+1 < len(src); i++ {
		if src[i] == '{' && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
			return i
		}
	}
	return -1
}

// findCloser returns the index of closer at or after from, skipping string
// literals when quotes is set.
func findCloser(src string, from int, closer string, quotes bool) (int, error) {
	for i := from; i < len(src); i++ {
		c := src[i]
		if quotes && (c == '\'' || c == '"') {
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			i = j
			continue
		}
		if strings.HasPrefix(src[i:], closer) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unclosed tag (want %q)", closer)
}

// findEndRaw finds {% endraw %} (with optional markers) from i.
func findEndRaw(src string, i int) (rawEnd, tagEnd int, left, right byte, ok bool) {
	for {
		k := strings.Index(src[i:], "{%")
		if k < 0 {
			return 0, 0, 0, 0, false
		}
		k += i
		j := k + 2
		var l byte
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			l = src[j]
			j++
		}
		end := strings.Index(src[j:], "%}")
		if end < 0 {
			return 0, 0, 0, 0, false
		}
		content := src[j : j+end]
		var r byte
		if n := len(content); n > 0 && (content[n-1] == '-' || content[n-1] == '+') {
			r = content[n-1]
			content = content[:n-1]
		}
		if strings.TrimSpace(content) == "endraw" {
			return k, j + end + 2, l, r, true
		}
		i = k + 2
	}
}

// Package tokenizer turns text into token ids and back exactly as the
// reference implementations do: Hugging Face `tokenizers` for a
// tokenizer.json, llama.cpp for a GGUF vocabulary.
//
// Supported: byte-level BPE (GPT-2, Llama-3, Qwen, SmolLM: Split regex and
// ByteLevel pre-tokenizers, merges by rank in either file format,
// ignore_merges), SentencePiece-style BPE with byte fallback (Llama-2,
// TinyLlama, Phi-3: Prepend/Replace normalizers, Metaspace, <0xNN> byte
// tokens, fuse_unk), added and special tokens matched inside the input as
// HF does (special, normalized, lstrip, rstrip, single_word),
// TemplateProcessing/Roberta/Bert/ByteLevel/Sequence post-processors and
// ByteLevel/Metaspace/Replace/ByteFallback/Fuse/Strip decoders; GGUF
// vocabularies (tokenizer.ggml.*) with llama.cpp's score-driven SPM merge
// and its per-model BPE pre-tokenizer regexes.
//
// Decoding replaces invalid UTF-8 the way Rust's from_utf8_lossy does
// (one U+FFFD per maximal invalid subpart), also for byte-fallback tokens
// (HF writes one U+FFFD per byte there), so that a StreamDecoder's output
// always concatenates to Decode's.
//
// The two pre-tokenizer patterns nearly every byte-level model uses (the
// GPT-2 one and the Llama-3/Qwen2 one) run on hand-written scanners; other
// patterns run on Go's regexp when RE2 can express them and on
// github.com/dlclark/regexp2 (lookarounds) otherwise.
//
// A Tokenizer is safe for concurrent use.
package tokenizer

import (
	"fmt"
	"slices"
	"strings"
)

// Tokenizer encodes and decodes text for one model.
type Tokenizer struct {
	tokens  []string       // id -> token text as the vocabulary spells it
	ids     map[string]int // token text -> id (model vocabulary and added tokens)
	special []bool         // by id
	added   map[int]*AddedToken

	rawAdded  *addedMatcher // tokens matched in the raw input
	normAdded *addedMatcher // tokens matched in normalized input
	norm      normalizer
	pre       preTokenizer
	bpe       *bpeModel
	spm       *spmModel
	// spmSpacePrefix: llama.cpp SPM adds a space before text at the start
	// and after every special token (add_space_prefix).
	spmSpacePrefix bool

	prefix, suffix []int // added by Encode(text, true)

	pieces     [][]byte // by id: decoded bytes
	stripStart int      // leading spaces the decoder strips from the output
	stripStop  int
	joinSpace  bool // no decoder: HF joins tokens with spaces

	bos, eos int
	eosSet   []int
	unk      int
	pad      int

	templates map[string]string // chat templates by name ("default" first)
}

// EncodeOptions controls EncodeWith.
type EncodeOptions struct {
	// AddSpecial adds BOS/EOS and the like as the post-processor (HF
	// add_special_tokens=True) or add_bos_token/add_eos_token say.
	AddSpecial bool
	// ParseSpecial matches special tokens written in the text. HF always
	// does; llama.cpp only when asked. Non-special added tokens are
	// matched either way.
	ParseSpecial bool
}

// Encode tokenizes text as HF's tokenizer(text, add_special_tokens=addSpecial)
// does: special tokens written in the text are recognized.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	return t.EncodeWith(text, EncodeOptions{AddSpecial: addSpecial, ParseSpecial: true})
}

// EncodeWith tokenizes text with explicit options.
func (t *Tokenizer) EncodeWith(text string, o EncodeOptions) []int {
	return t.encode(text, o, nil)
}

// EncodeTokens is EncodeWith that also returns each token's text as HF's
// Encoding.tokens has it: the vocabulary spelling, or for an added token
// the stretch of (normalized) input it matched.
func (t *Tokenizer) EncodeTokens(text string, o EncodeOptions) ([]int, []string) {
	var toks []string
	ids := t.encode(text, o, &toks)
	return ids, toks
}

func (t *Tokenizer) encode(text string, o EncodeOptions, toks *[]string) []int {
	ids := make([]int, 0, len(text)/3+4)
	// note records token texts for EncodeTokens: matched text for an
	// added token, the vocabulary spelling for everything from start on.
	note := func(start int, matched string) {
		if toks == nil {
			return
		}
		if matched != "" {
			*toks = append(*toks, matched)
			return
		}
		for _, id := range ids[start:] {
			*toks = append(*toks, t.Token(id))
		}
	}
	if o.AddSpecial {
		ids = append(ids, t.prefix...)
		note(0, "")
	}
	skip := func(a *AddedToken) bool { return a.Special && !o.ParseSpecial }
	var pstack [8]piece
	pieces := t.rawAdded.split(text, true, skip, pstack[:0])
	prevSpecial := true
	encodeWord := func(w string, _ bool) { ids = t.bpe.encodeWord(w, ids) }
	for _, p := range pieces {
		if p.id >= 0 {
			ids = append(ids, p.id)
			note(0, p.text)
			prevSpecial = true
			continue
		}
		start := len(ids)
		if t.spm != nil {
			s := p.text
			if t.spmSpacePrefix && prevSpecial {
				s = " " + s
			}
			ids = t.spm.encode(strings.ReplaceAll(s, " ", "\u2581"), ids)
			note(start, "")
			prevSpecial = false
			continue
		}
		s := p.text
		if t.norm != nil {
			s = t.norm(s)
		}
		var sub [4]piece
		for _, q := range t.normAdded.split(s, p.first, skip, sub[:0]) {
			start := len(ids)
			if q.id >= 0 {
				ids = append(ids, q.id)
				note(0, q.text)
				continue
			}
			if t.pre != nil {
				t.pre.each(q.text, q.first, encodeWord)
			} else {
				ids = t.bpe.encodeWord(q.text, ids)
			}
			note(start, "")
		}
		prevSpecial = false
	}
	if o.AddSpecial {
		start := len(ids)
		ids = append(ids, t.suffix...)
		note(start, "")
	}
	return ids
}

// SpecialAdded returns the ids Encode(text, true) puts before and after
// the text (BOS, EOS, ...).
func (t *Tokenizer) SpecialAdded() (prefix, suffix []int) {
	return slices.Clone(t.prefix), slices.Clone(t.suffix)
}

// Tokens returns the vocabulary spelling of each id ("" for unknown ids).
func (t *Tokenizer) Tokens(ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.Token(id)
	}
	return out
}

// Token is the vocabulary spelling of id, "" when out of range.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID looks a token up by its vocabulary spelling.
func (t *Tokenizer) ID(token string) (int, bool) {
	id, ok := t.ids[token]
	return id, ok
}

// VocabSize is one more than the largest id.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS is the beginning-of-sequence id, -1 when none.
func (t *Tokenizer) BOS() int { return t.bos }

// EOS is the primary end-of-sequence id, -1 when none.
func (t *Tokenizer) EOS() int { return t.eos }

// EOSSet lists every id that ends generation (generation_config
// eos_token_id lists, EOS, GGUF eot/eom ids).
func (t *Tokenizer) EOSSet() []int { return slices.Clone(t.eosSet) }

// IsEOS reports whether id ends generation.
func (t *Tokenizer) IsEOS(id int) bool { return slices.Contains(t.eosSet, id) }

// IsSpecial reports whether id is a special (control) token.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// AddedTokens lists the added tokens, by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, 0, len(t.added))
	for _, a := range t.added {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b AddedToken) int { return a.ID - b.ID })
	return out
}

// ChatTemplate returns the named chat template ("" or "default" for the
// default one) from tokenizer_config.json or GGUF metadata.
func (t *Tokenizer) ChatTemplate(name string) (string, bool) {
	if name == "" {
		name = "default"
	}
	s, ok := t.templates[name]
	return s, ok
}

// ChatTemplates lists the template names.
func (t *Tokenizer) ChatTemplateNames() []string {
	var names []string
	for n := range t.templates {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Decode turns ids back into text. skipSpecial drops special tokens (HF
// skip_special_tokens). Ids out of range are ignored.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	buf := make([]byte, 0, len(ids)*4)
	n := 0
	for _, id := range ids {
		if id < 0 || id >= len(t.pieces) || (skipSpecial && t.special[id]) {
			continue
		}
		if t.joinSpace && n > 0 {
			buf = append(buf, ' ')
		}
		buf = append(buf, t.pieces[id]...)
		n++
	}
	for k := 0; k < t.stripStart && len(buf) > 0 && buf[0] == ' '; k++ {
		buf = buf[1:]
	}
	for k := 0; k < t.stripStop && len(buf) > 0 && buf[len(buf)-1] == ' '; k++ {
		buf = buf[:len(buf)-1]
	}
	return string(appendLossy(nil, buf))
}

// StreamDecoder decodes ids one at a time for streaming output. Every
// returned piece is valid UTF-8; bytes of an unfinished character are
// held back until it completes, and the concatenation of all pieces (plus
// Flush) equals Decode of all ids.
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
	started     bool // some bytes went out (or were stripped)
	stripped    int
	n           int
}

// NewStreamDecoder starts a stream that keeps special tokens.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// NewStreamDecoderSkip starts a stream; skipSpecial drops special tokens.
func (t *Tokenizer) NewStreamDecoderSkip(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// NewStreamDecoderAfter starts a stream that continues the text of prompt:
// the concatenation of its pieces (plus Flush) is Decode(prompt+ids)
// minus Decode(prompt). Rules that apply at the start of the text (SPM's
// dropped leading space, a decoder's Strip, the space a join-with-spaces
// vocabulary puts between tokens) are applied where the prompt starts,
// not to the first generated token. A prompt that ends inside a
// character (a byte-fallback prefix) is completed by the continuation.
func (t *Tokenizer) NewStreamDecoderAfter(prompt []int, skipSpecial bool) *StreamDecoder {
	d := &StreamDecoder{t: t, skipSpecial: skipSpecial}
	for _, id := range prompt {
		d.Next(id)
	}
	return d
}

// Next adds one id and returns the text it completes (maybe "").
func (d *StreamDecoder) Next(id int) string {
	t := d.t
	if id < 0 || id >= len(t.pieces) || (d.skipSpecial && t.special[id]) {
		return ""
	}
	if t.joinSpace && d.n > 0 {
		d.pending = append(d.pending, ' ')
	}
	d.n++
	p := t.pieces[id]
	for len(p) > 0 && d.stripped < t.stripStart && !d.started {
		if p[0] != ' ' {
			d.started = true
			break
		}
		p = p[1:]
		d.stripped++
	}
	if len(p) > 0 {
		d.started = true
	}
	d.pending = append(d.pending, p...)
	if t.stripStop > 0 {
		// Trailing spaces may yet be stripped: hold them back.
		k := len(d.pending)
		for k > 0 && d.pending[k-1] == ' ' {
			k--
		}
		return d.emit(k)
	}
	return d.emit(len(d.pending))
}

// emit outputs pending[:limit] up to the last complete character.
func (d *StreamDecoder) emit(limit int) string {
	end := limit - incompleteTail(d.pending[:limit])
	if end <= 0 {
		return ""
	}
	out := string(appendLossy(nil, d.pending[:end]))
	d.pending = append(d.pending[:0], d.pending[end:]...)
	return out
}

// Flush returns whatever is held back (an unfinished character becomes
// U+FFFD), ending the stream.
func (d *StreamDecoder) Flush() string {
	buf := d.pending
	for k := 0; k < d.t.stripStop && len(buf) > 0 && buf[len(buf)-1] == ' '; k++ {
		buf = buf[:len(buf)-1]
	}
	d.pending = d.pending[:0]
	return string(appendLossy(nil, buf))
}

func (t *Tokenizer) String() string {
	kind := "bpe"
	if t.spm != nil {
		kind = "spm"
	}
	return fmt.Sprintf("tokenizer(%s, %d tokens)", kind, len(t.tokens))
}

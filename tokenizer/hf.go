package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/model"
)

// maxVocab bounds vocabulary ids so a corrupt file cannot make us
// allocate an arbitrary table.
const maxVocab = 1 << 24

type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type hfFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string          `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		UnkToken                *string         `json:"unk_token"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	} `json:"model"`
}

// component is the common shape of normalizers, pre-tokenizers,
// post-processors and decoders: a "type" plus type-specific fields.
type component map[string]json.RawMessage

func (c component) typ() string {
	var s string
	json.Unmarshal(c["type"], &s)
	return s
}

func (c component) str(key, def string) string {
	var s string
	if raw, ok := c[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return def
}

func (c component) boolean(key string, def bool) bool {
	var b bool
	if raw, ok := c[key]; ok && json.Unmarshal(raw, &b) == nil {
		return b
	}
	return def
}

func (c component) integer(key string, def int) int {
	var n int
	if raw, ok := c[key]; ok && json.Unmarshal(raw, &n) == nil {
		return n
	}
	return def
}

func (c component) list(key string) ([]component, error) {
	var l []component
	if raw, ok := c[key]; ok {
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return l, nil
}

func parseComponent(raw json.RawMessage) (component, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// pattern parses {"String": s} or {"Regex": r}.
func (c component) pattern(key string) (matcher, error) {
	var p struct {
		String *string
		Regex  *string
	}
	if err := json.Unmarshal(c[key], &p); err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	switch {
	case p.String != nil:
		return literalMatcher(*p.String), nil
	case p.Regex != nil:
		return compilePattern(*p.Regex)
	}
	return nil, errors.New("pattern: neither String nor Regex")
}

// FromFile loads a tokenizer.json (or tokenizer.json.gz). A
// tokenizer_config.json and generation_config.json beside it are read too.
func FromFile(path string) (*Tokenizer, error) {
	data, err := mapfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
		}
		data, err = io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
		}
	}
	td := &model.TokenizerData{Kind: "hf", Files: map[string][]byte{"tokenizer.json": data}}
	dir := path[:strings.LastIndexByte(path, '/')+1]
	base := path[len(dir):]
	// Beside foo.tokenizer.json look for foo.tokenizer_config.json too.
	stem := strings.TrimSuffix(strings.TrimSuffix(base, ".gz"), "tokenizer.json")
	for _, name := range []string{"tokenizer_config.json", "generation_config.json"} {
		if b, err := mapfile.ReadFile(dir + stem + name); err == nil {
			td.Files[name] = b
		} else if b, err := mapfile.ReadFile(dir + name); err == nil && stem == "" {
			td.Files[name] = b
		}
	}
	t, err := Load(td)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Load builds a tokenizer from a model's tokenizer material: Kind "hf"
// (tokenizer.json, optional tokenizer_config.json and
// generation_config.json) or "gguf" (gguf_vocab.json: the GGUF tokenizer.*
// metadata as a JSON object).
func Load(td *model.TokenizerData) (*Tokenizer, error) {
	if td == nil {
		return nil, errors.New("tokenizer: no tokenizer data")
	}
	switch td.Kind {
	case "hf":
		tj, ok := td.Files["tokenizer.json"]
		if !ok {
			return nil, errors.New("tokenizer: hf: missing tokenizer.json")
		}
		return fromHF(tj, td.Files["tokenizer_config.json"], td.Files["generation_config.json"])
	case "gguf":
		raw, ok := td.Files["gguf_vocab.json"]
		if !ok {
			return nil, errors.New("tokenizer: gguf: missing gguf_vocab.json")
		}
		var md map[string]any
		if err := json.Unmarshal(raw, &md); err != nil {
			return nil, fmt.Errorf("tokenizer: gguf_vocab.json: %w", err)
		}
		return FromGGUFMetadata(md)
	}
	return nil, fmt.Errorf("tokenizer: unknown tokenizer kind %q", td.Kind)
}

// FromJSON parses tokenizer.json bytes (config files optional, may be nil).
func FromJSON(tokenizerJSON, tokenizerConfig, generationConfig []byte) (*Tokenizer, error) {
	return fromHF(tokenizerJSON, tokenizerConfig, generationConfig)
}

func fromHF(tj, cfg, gen []byte) (*Tokenizer, error) {
	t, err := parseHF(tj)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	if err := t.applyConfig(cfg, gen); err != nil {
		return nil, err
	}
	return t, nil
}

func parseHF(tj []byte) (*Tokenizer, error) {
	var f hfFile
	if err := json.Unmarshal(tj, &f); err != nil {
		return nil, err
	}
	if f.Model.Type != "" && f.Model.Type != "BPE" {
		return nil, fmt.Errorf("model type %q is not supported (BPE only)", f.Model.Type)
	}
	vocab, err := parseVocab(f.Model.Vocab)
	if err != nil {
		return nil, fmt.Errorf("model.vocab: %w", err)
	}
	if len(vocab) == 0 {
		return nil, errors.New("model.vocab is empty")
	}
	size := 0
	for tok, id := range vocab {
		if id < 0 || id >= maxVocab {
			return nil, fmt.Errorf("model.vocab: token %q has id %d", tok, id)
		}
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.ID >= maxVocab {
			return nil, fmt.Errorf("added_tokens: token %q has id %d", a.Content, a.ID)
		}
		size = max(size, a.ID+1)
	}
	t := &Tokenizer{
		tokens:  make([]string, size),
		ids:     make(map[string]int, len(vocab)+len(f.AddedTokens)),
		special: make([]bool, size),
		added:   map[int]*AddedToken{},
		bos:     -1, eos: -1, unk: -1, pad: -1,
		templates: map[string]string{},
	}
	for tok, id := range vocab {
		t.tokens[id] = tok
		t.ids[tok] = id
	}
	var rawToks, normToks []*AddedToken
	for _, a := range f.AddedTokens {
		at := &AddedToken{ID: a.ID, Content: a.Content, Special: a.Special, Normalized: a.Normalized,
			LStrip: a.LStrip, RStrip: a.RStrip, SingleWord: a.SingleWord}
		t.added[a.ID] = at
		t.tokens[a.ID] = a.Content
		t.ids[a.Content] = a.ID
		t.special[a.ID] = a.Special
		// HF matches normalized tokens (special or not) in normalized
		// text, against their own normalized spelling.
		if a.Normalized {
			normToks = append(normToks, at)
		} else {
			rawToks = append(rawToks, at)
		}
	}

	if t.norm, err = buildNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	rawMode := false
	if t.pre, rawMode, err = buildPreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	t.rawAdded = newAddedMatcher(rawToks, nil)
	t.normAdded = newAddedMatcher(normToks, t.norm)

	m := &bpeModel{vocab: vocab, merges: make(map[uint64]uint64, len(f.Model.Merges)/16), unk: -1,
		fuseUnk: f.Model.FuseUnk, byteFallback: f.Model.ByteFallback,
		ignoreMerges: f.Model.IgnoreMerges, raw: rawMode}
	if p := f.Model.ContinuingSubwordPrefix; p != nil {
		m.contPrefix = *p
	}
	if p := f.Model.EndOfWordSuffix; p != nil {
		m.endSuffix = *p
	}
	if u := f.Model.UnkToken; u != nil {
		if id, ok := vocab[*u]; ok {
			m.unk = id
			t.unk = id
		}
	}
	if err := parseMerges(f.Model.Merges, m.addMerge); err != nil {
		return nil, fmt.Errorf("model.merges: %w", err)
	}
	m.init()
	t.bpe = m

	if err := t.buildPost(f.PostProcessor); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	if err := t.buildDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if len(t.prefix) > 0 {
		t.bos = t.prefix[0]
	}
	return t, nil
}

// parseMerges accepts ["a b", ...] and [["a","b"], ...].
func parseMerges(raw json.RawMessage, add func(a, b string, rank int)) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if ok, err := fastMerges(raw, add); ok {
		return err
	}
	// Peek at the first element to pick the format.
	first := bytes.TrimLeft(raw, " \t\r\n")
	if len(first) > 0 {
		first = bytes.TrimLeft(first[1:], " \t\r\n")
	}
	var strs []string
	if len(first) > 0 && first[0] == '"' && json.Unmarshal(raw, &strs) == nil {
		for rank, s := range strs {
			a, b, ok := splitMerge(s)
			if !ok {
				return fmt.Errorf("merge %d: %q is not two tokens", rank, s)
			}
			add(a, b, rank)
		}
		return nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return fmt.Errorf("want [\"a b\", ...] or [[\"a\", \"b\"], ...]: %w", err)
	}
	for rank, p := range pairs {
		if len(p) != 2 {
			return fmt.Errorf("merge %d: %d tokens, want 2", rank, len(p))
		}
		add(p[0], p[1], rank)
	}
	return nil
}

// splitMerge splits "a b" at the first space after the first byte, as
// llama.cpp does (a token may itself be a space in some vocabularies).
func splitMerge(s string) (string, string, bool) {
	if len(s) < 3 {
		return "", "", false
	}
	k := strings.IndexByte(s[1:], ' ')
	if k < 0 {
		return "", "", false
	}
	return s[:k+1], s[k+2:], true
}

func buildNormalizer(raw json.RawMessage) (normalizer, error) {
	c, err := parseComponent(raw)
	if err != nil || c == nil {
		return nil, err
	}
	return normalizerFrom(c)
}

func normalizerFrom(c component) (normalizer, error) {
	switch typ := c.typ(); typ {
	case "Sequence":
		list, err := c.list("normalizers")
		if err != nil {
			return nil, err
		}
		var ns []normalizer
		for _, sub := range list {
			n, err := normalizerFrom(sub)
			if err != nil {
				return nil, err
			}
			if n != nil {
				ns = append(ns, n)
			}
		}
		return seqNormalizer(ns), nil
	case "Prepend":
		return prependNormalizer(c.str("prepend", "")), nil
	case "Replace":
		m, err := c.pattern("pattern")
		if err != nil {
			return nil, err
		}
		return replaceNormalizer(m, c.str("content", "")), nil
	case "NFC":
		return nfcNormalizer, nil
	case "NFD":
		return nfdNormalizer, nil
	case "NFKC":
		return nfkcNormalizer, nil
	case "NFKD":
		return nfkdNormalizer, nil
	case "Lowercase":
		return lowerNormalizer, nil
	case "Strip":
		return stripNormalizer(c.boolean("strip_left", true), c.boolean("strip_right", true)), nil
	case "StripAccents":
		return stripAccents, nil
	case "Precompiled":
		// SentencePiece's compiled character map; in the models we
		// meet it is NFKC-like and identity on ordinary text.
		return nil, nil
	default:
		return nil, fmt.Errorf("unsupported normalizer %q", typ)
	}
}

// buildPreTokenizer returns the pre-tokenizer and whether the byte-level
// mapping is its last step (then the model reads raw bytes).
func buildPreTokenizer(raw json.RawMessage) (preTokenizer, bool, error) {
	c, err := parseComponent(raw)
	if err != nil || c == nil {
		return nil, false, err
	}
	var steps []component
	if c.typ() == "Sequence" {
		if steps, err = c.list("pretokenizers"); err != nil {
			return nil, false, err
		}
	} else {
		steps = []component{c}
	}
	var seq preSequence
	rawMode := false
	for i, s := range steps {
		p, err := preTokenizerFrom(s, i == len(steps)-1)
		if err != nil {
			return nil, false, err
		}
		if bl, ok := p.(*preByteLevel); ok && !bl.mapBytes {
			rawMode = true
		}
		seq = append(seq, p)
	}
	if len(seq) == 1 {
		return seq[0], rawMode, nil
	}
	return seq, rawMode, nil
}

func preTokenizerFrom(c component, last bool) (preTokenizer, error) {
	switch typ := c.typ(); typ {
	case "Sequence":
		// Nested sequences: flatten by building each with mapping on.
		list, err := c.list("pretokenizers")
		if err != nil {
			return nil, err
		}
		var seq preSequence
		for _, s := range list {
			p, err := preTokenizerFrom(s, false)
			if err != nil {
				return nil, err
			}
			seq = append(seq, p)
		}
		return seq, nil
	case "ByteLevel":
		p := &preByteLevel{addPrefixSpace: c.boolean("add_prefix_space", true), mapBytes: !last}
		if c.boolean("use_regex", true) {
			m, err := compilePattern(gpt2Pattern)
			if err != nil {
				return nil, err
			}
			p.split = &preSplit{m: m, beh: splitIsolated}
		}
		return p, nil
	case "Split":
		m, err := c.pattern("pattern")
		if err != nil {
			return nil, err
		}
		beh, err := parseBehavior(c.str("behavior", "Isolated"))
		if err != nil {
			return nil, err
		}
		return &preSplit{m: m, beh: beh, invert: c.boolean("invert", false)}, nil
	case "Digits":
		if c.boolean("individual_digits", false) {
			m, _ := compilePattern(`\p{N}`)
			return &preSplit{m: m, beh: splitIsolated}, nil
		}
		m, _ := compilePattern(`\p{N}+`)
		return &preSplit{m: m, beh: splitIsolated}, nil
	case "Metaspace":
		p := &preMetaspace{repl: c.str("replacement", "\u2581"), split: c.boolean("split", true)}
		p.prepend = c.str("prepend_scheme", "")
		if p.prepend == "" {
			if c.boolean("add_prefix_space", true) {
				p.prepend = "always"
			} else {
				p.prepend = "never"
			}
		}
		return p, nil
	case "Whitespace":
		m, _ := compilePattern(`\w+|[^\w\s]+`)
		return &preSplit{m: m, beh: splitRemoved, invert: true}, nil
	case "WhitespaceSplit":
		m, _ := compilePattern(`\s+`)
		return &preSplit{m: m, beh: splitRemoved}, nil
	case "Punctuation":
		m, _ := compilePattern(`\p{P}`)
		beh, err := parseBehavior(c.str("behavior", "Isolated"))
		if err != nil {
			return nil, err
		}
		return &preSplit{m: m, beh: beh}, nil
	default:
		return nil, fmt.Errorf("unsupported pre-tokenizer %q", typ)
	}
}

func (t *Tokenizer) buildPost(raw json.RawMessage) error {
	c, err := parseComponent(raw)
	if err != nil || c == nil {
		return err
	}
	pre, suf, err := t.postFrom(c)
	if err != nil {
		return err
	}
	t.prefix, t.suffix = pre, suf
	return nil
}

func (t *Tokenizer) postFrom(c component) (prefix, suffix []int, err error) {
	switch typ := c.typ(); typ {
	case "Sequence":
		list, err := c.list("processors")
		if err != nil {
			return nil, nil, err
		}
		for _, sub := range list {
			p, s, err := t.postFrom(sub)
			if err != nil {
				return nil, nil, err
			}
			prefix = append(p, prefix...)
			suffix = append(suffix, s...)
		}
		return prefix, suffix, nil
	case "ByteLevel":
		return nil, nil, nil
	case "TemplateProcessing":
		var single []map[string]struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(c["single"], &single); err != nil {
			return nil, nil, fmt.Errorf("TemplateProcessing.single: %w", err)
		}
		var specials map[string]struct {
			IDs []int `json:"ids"`
		}
		if raw, ok := c["special_tokens"]; ok {
			if err := json.Unmarshal(raw, &specials); err != nil {
				return nil, nil, fmt.Errorf("TemplateProcessing.special_tokens: %w", err)
			}
		}
		seenA := false
		for _, item := range single {
			if _, ok := item["Sequence"]; ok {
				seenA = true
				continue
			}
			st, ok := item["SpecialToken"]
			if !ok {
				continue
			}
			sp, ok := specials[st.ID]
			if !ok {
				return nil, nil, fmt.Errorf("TemplateProcessing: special token %q not defined", st.ID)
			}
			if seenA {
				suffix = append(suffix, sp.IDs...)
			} else {
				prefix = append(prefix, sp.IDs...)
			}
		}
		return prefix, suffix, nil
	case "RobertaProcessing", "BertProcessing":
		var cls, sep []json.RawMessage
		json.Unmarshal(c["cls"], &cls)
		json.Unmarshal(c["sep"], &sep)
		var clsID, sepID int
		if len(cls) != 2 || json.Unmarshal(cls[1], &clsID) != nil || len(sep) != 2 || json.Unmarshal(sep[1], &sepID) != nil {
			return nil, nil, fmt.Errorf("%s: bad cls/sep", typ)
		}
		return []int{clsID}, []int{sepID}, nil
	default:
		return nil, nil, fmt.Errorf("unsupported post-processor %q", typ)
	}
}

// decodeStep transforms one token's text or bytes.
type decodeStep struct {
	kind     string // "replace", "bytefallback", "bytelevel", "metaspace"
	from, to string
}

func (t *Tokenizer) buildDecoder(raw json.RawMessage) error {
	c, err := parseComponent(raw)
	if err != nil {
		return err
	}
	var steps []decodeStep
	if c == nil {
		t.joinSpace = true
	} else if steps, err = t.decoderFrom(c); err != nil {
		return err
	}
	t.pieces = make([][]byte, len(t.tokens))
	for id, tok := range t.tokens {
		t.pieces[id] = applyDecodeSteps(tok, steps)
	}
	return nil
}

func (t *Tokenizer) decoderFrom(c component) ([]decodeStep, error) {
	switch typ := c.typ(); typ {
	case "Sequence":
		list, err := c.list("decoders")
		if err != nil {
			return nil, err
		}
		var steps []decodeStep
		for _, sub := range list {
			s, err := t.decoderFrom(sub)
			if err != nil {
				return nil, err
			}
			steps = append(steps, s...)
		}
		return steps, nil
	case "ByteLevel":
		return []decodeStep{{kind: "bytelevel"}}, nil
	case "ByteFallback":
		return []decodeStep{{kind: "bytefallback"}}, nil
	case "Fuse":
		return nil, nil
	case "Replace":
		var p struct {
			String *string
			Regex  *string
		}
		if err := json.Unmarshal(c["pattern"], &p); err != nil || p.String == nil {
			return nil, errors.New("Replace decoder: only String patterns are supported")
		}
		return []decodeStep{{kind: "replace", from: *p.String, to: c.str("content", "")}}, nil
	case "Strip":
		if c.str("content", " ") != " " {
			return nil, errors.New("Strip decoder: only spaces can be stripped")
		}
		t.stripStart += c.integer("start", 0)
		t.stripStop += c.integer("stop", 0)
		return nil, nil
	case "Metaspace":
		repl := c.str("replacement", "\u2581")
		scheme := c.str("prepend_scheme", "")
		if scheme == "" && c.boolean("add_prefix_space", true) || scheme == "always" || scheme == "first" {
			t.stripStart++
		}
		return []decodeStep{{kind: "replace", from: repl, to: " "}}, nil
	default:
		return nil, fmt.Errorf("unsupported decoder %q", typ)
	}
}

func applyDecodeSteps(tok string, steps []decodeStep) []byte {
	b := []byte(tok)
	isByte := false
	for _, s := range steps {
		if isByte {
			break
		}
		switch s.kind {
		case "replace":
			b = bytes.ReplaceAll(b, []byte(s.from), []byte(s.to))
		case "bytefallback":
			if v, ok := parseByteToken(string(b)); ok {
				b = []byte{v}
				isByte = true
			}
		case "bytelevel":
			if raw, ok := byteLevelDecode(string(b)); ok {
				b = raw
			}
		}
	}
	return b
}

// parseByteToken recognizes <0xNN>.
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// applyConfig reads tokenizer_config.json (special token names, chat
// template) and generation_config.json (eos_token_id lists).
func (t *Tokenizer) applyConfig(cfg, gen []byte) error {
	if len(cfg) > 0 {
		var c map[string]json.RawMessage
		if err := json.Unmarshal(cfg, &c); err != nil {
			return fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
		}
		tokenName := func(key string) (string, bool) {
			raw, ok := c[key]
			if !ok {
				return "", false
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return s, true
			}
			var obj struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
				return obj.Content, true
			}
			return "", false
		}
		if s, ok := tokenName("bos_token"); ok {
			if id, ok := t.ids[s]; ok {
				t.bos = id
			}
		}
		if s, ok := tokenName("eos_token"); ok {
			if id, ok := t.ids[s]; ok {
				t.eos = id
			}
		}
		if s, ok := tokenName("pad_token"); ok {
			if id, ok := t.ids[s]; ok {
				t.pad = id
			}
		}
		if raw, ok := c["chat_template"]; ok {
			if err := t.parseTemplates(raw); err != nil {
				return fmt.Errorf("tokenizer: tokenizer_config.json: chat_template: %w", err)
			}
		}
	}
	if t.eos < 0 {
		for _, name := range []string{"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "<|im_end|>"} {
			if id, ok := t.ids[name]; ok {
				t.eos = id
				break
			}
		}
	}
	if t.eos >= 0 {
		t.eosSet = append(t.eosSet, t.eos)
	}
	if len(gen) > 0 {
		var g struct {
			EOS json.RawMessage `json:"eos_token_id"`
			BOS *int            `json:"bos_token_id"`
		}
		if err := json.Unmarshal(gen, &g); err != nil {
			return fmt.Errorf("tokenizer: generation_config.json: %w", err)
		}
		var one int
		var many []int
		if json.Unmarshal(g.EOS, &one) == nil {
			many = []int{one}
		} else {
			json.Unmarshal(g.EOS, &many)
		}
		for _, id := range many {
			if id >= 0 && id < len(t.tokens) && !slices.Contains(t.eosSet, id) {
				t.eosSet = append(t.eosSet, id)
			}
		}
		if t.eos < 0 && len(t.eosSet) > 0 {
			t.eos = t.eosSet[0]
		}
	}
	return nil
}

// parseTemplates accepts a string or a list of {name, template}.
func (t *Tokenizer) parseTemplates(raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t.templates["default"] = s
		return nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return err
	}
	for _, e := range list {
		t.templates[e.Name] = e.Template
	}
	return nil
}

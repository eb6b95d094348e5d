package tokenizer

import (
	"fmt"
	"slices"

	"github.com/cortiq/cortiq/gguf"
	"math"
	"strings"
)

// GGUF token types (llama.cpp's llama_token_type).
const (
	ggufNormal      = 1
	ggufUnknown     = 2
	ggufControl     = 3
	ggufUserDefined = 4
	ggufUnused      = 5
	ggufByte        = 6
)

// ggufPreRegexes are llama.cpp's pre-tokenizer regexes by
// tokenizer.ggml.pre, applied in order, each splitting the pieces the
// previous one left (matches and the text between them both kept).
var ggufPreRegexes = map[string][]string{
	"llama3":      {llama3Pattern},
	"llama-bpe":   {llama3Pattern},
	"llama-v3":    {llama3Pattern},
	"dbrx":        {llama3Pattern},
	"smaug-bpe":   {llama3Pattern},
	"chatglm-bpe": {llama3Pattern},
	"deepseek-llm": {
		"[\r\n]",
		`\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+`,
		`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
		`\s+$`,
		`[一-龥ࠀ-一가-퟿]+`,
		`\p{N}+`,
	},
	"deepseek-coder": {"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`},
	"falcon": {
		"[\\p{P}\\$\\+<=>\\^~\\|`]+",
		gpt2PatternLlamaCpp,
		"[0-9][0-9][0-9]",
	},
	"starcoder":    {`\p{N}`, gpt2PatternLlamaCpp},
	"refact":       {`\p{N}`, gpt2PatternLlamaCpp},
	"command-r":    {`\p{N}`, gpt2PatternLlamaCpp},
	"smollm":       {`\p{N}`, gpt2PatternLlamaCpp},
	"codeshell":    {`\p{N}`, gpt2PatternLlamaCpp},
	"exaone":       {`\p{N}`, gpt2PatternLlamaCpp},
	"minerva-7b":   {`\p{N}`, gpt2PatternLlamaCpp},
	"gpt-2":        {gpt2PatternLlamaCpp},
	"mpt":          {gpt2PatternLlamaCpp},
	"olmo":         {gpt2PatternLlamaCpp},
	"jais":         {gpt2PatternLlamaCpp},
	"trillion":     {gpt2PatternLlamaCpp},
	"stablelm2":    {qwen2Pattern},
	"qwen2":        {qwen2Pattern},
	"hunyuan":      {qwen2Pattern},
	"poro-chat":    {` ?[^(\s|.,!?…。，、।۔،)]+`},
	"bloom":        {` ?[^(\s|.,!?…。，、।۔،)]+`},
	"gpt3-finnish": {` ?[^(\s|.,!?…。，、।۔،)]+`},
	"viking":       {` ?[^(\s|.,!?…。，、।۔،)]+`, `\p{N}`},
	"deepseek-v3": {
		`\p{N}{1,3}`,
		`[一-龥぀-ゟ゠-ヿ]+`,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
	},
	"tekken":     {`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"gpt-4o":     {gpt4oPattern},
	"minimax-m2": {gpt4oPattern},
	"seed-coder": {`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"grok-2":     {qwen2Pattern},
	"bailingmoe": {`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`},
	"default": {
		`[\p{P}\$\+<=>\^~\|]+`,
		gpt2PatternLlamaCpp,
		`\p{N}+`,
		"[0-9][0-9][0-9]",
	},
}

const gpt4oPattern = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// gpt2PatternLlamaCpp is llama.cpp's spelling of the GPT-2 pattern (no
// final \s+; the gap it leaves is kept as a piece, which is the same).
const gpt2PatternLlamaCpp = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`

func init() {
	knownScanners[gpt2PatternLlamaCpp] = &scanner{kind: scanGPT2}
}

// ggufIgnoreMerges lists pre types for which llama.cpp looks a whole
// pre-token up before merging.
var ggufIgnoreMerges = map[string]bool{"llama3": true, "llama-bpe": true, "llama-v3": true}

// FromGGUFMetadata builds a tokenizer from GGUF tokenizer.* metadata, as
// package gguf returns it (typed scalars and slices) or after a JSON round
// trip (float64 numbers, []any arrays). Encoding follows llama.cpp.
func FromGGUFMetadata(md map[string]any) (*Tokenizer, error) {
	t, err := fromGGUF(md)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: gguf: %w", err)
	}
	return t, nil
}

func fromGGUF(md map[string]any) (*Tokenizer, error) {
	modelName, _ := mdString(md, "tokenizer.ggml.model")
	tokens, ok := mdStrings(md, "tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("tokenizer.ggml.tokens missing or not a string array")
	}
	if len(tokens) == 0 || len(tokens) > maxVocab {
		return nil, fmt.Errorf("tokenizer.ggml.tokens has %d entries", len(tokens))
	}
	n := len(tokens)
	types := make([]int, n)
	for i := range types {
		types[i] = ggufNormal
	}
	if tt, ok := mdInts(md, "tokenizer.ggml.token_type"); ok {
		if len(tt) != n {
			return nil, fmt.Errorf("tokenizer.ggml.token_type has %d entries for %d tokens", len(tt), n)
		}
		for i, v := range tt {
			types[i] = int(v)
		}
	}
	t := &Tokenizer{
		tokens:  tokens,
		ids:     make(map[string]int, n),
		special: make([]bool, n),
		added:   map[int]*AddedToken{},
		bos:     -1, eos: -1, unk: -1, pad: -1,
		templates: map[string]string{},
	}
	vocab := make(map[string]int, n)
	for i, tok := range tokens {
		vocab[tok] = i // last wins, as llama.cpp's token_to_id
		t.ids[tok] = i
	}
	// id reads a special token's id; one outside the vocabulary, given or
	// defaulted (a one-token vocabulary has no default BOS 1), means none.
	id := func(key string, def int) int {
		v, ok := mdInt(md, key)
		if !ok {
			v = int64(def)
		}
		if v < 0 || v >= int64(n) {
			return -1
		}
		return int(v)
	}
	var addBOS, addEOS bool
	switch modelName {
	case "llama":
		scores := make([]float32, n)
		if sc, ok := mdFloats(md, "tokenizer.ggml.scores"); ok {
			if len(sc) != n {
				return nil, fmt.Errorf("tokenizer.ggml.scores has %d entries for %d tokens", len(sc), n)
			}
			copy(scores, sc)
		}
		t.unk = id("tokenizer.ggml.unknown_token_id", 0)
		t.bos = id("tokenizer.ggml.bos_token_id", 1)
		t.eos = id("tokenizer.ggml.eos_token_id", 2)
		m := &spmModel{vocab: vocab, scores: scores, unk: t.unk}
		for b := 0; b < 256; b++ {
			m.fallbackIDs[b] = -1
			if v, ok := vocab[byteTokenName(byte(b))]; ok {
				m.fallbackIDs[b] = int32(v)
			} else if v, ok := vocab[string([]byte{byte(b)})]; ok {
				m.fallbackIDs[b] = int32(v)
			}
		}
		m.chunkAtSpace = canChunkAtSpace(vocab)
		t.spm = m
		t.spmSpacePrefix = mdBool(md, "tokenizer.ggml.add_space_prefix", true)
		addBOS = mdBool(md, "tokenizer.ggml.add_bos_token", true)
		addEOS = mdBool(md, "tokenizer.ggml.add_eos_token", false)
	case "gpt2":
		pre, _ := mdString(md, "tokenizer.ggml.pre")
		regexes, ok := ggufPreRegexes[pre]
		if !ok {
			// llama.cpp refuses unknown types; its "default" regexes
			// are the best guess for a vocabulary converted without one.
			if pre != "" && pre != "default" {
				return nil, fmt.Errorf("tokenizer.ggml.pre %q is not supported", pre)
			}
			regexes = ggufPreRegexes["default"]
		}
		var seq preSequence
		for _, r := range regexes {
			m, err := compilePattern(r)
			if err != nil {
				return nil, fmt.Errorf("pre-tokenizer %q: %w", pre, err)
			}
			seq = append(seq, &preSplit{m: m, beh: splitIsolated})
		}
		seq = append(seq, &preByteLevel{})
		t.pre = seq
		m := &bpeModel{vocab: vocab, merges: make(map[uint64]uint64, mdArrayLen(md, "tokenizer.ggml.merges")), unk: -1, raw: true,
			ignoreMerges: ggufIgnoreMerges[pre]}
		merges, ok := mdStrings(md, "tokenizer.ggml.merges")
		if !ok {
			return nil, fmt.Errorf("tokenizer.ggml.merges missing for a gpt2 vocabulary")
		}
		for rank, s := range merges {
			a, b, ok := splitMerge(s)
			if !ok {
				return nil, fmt.Errorf("tokenizer.ggml.merges[%d] = %q is not two tokens", rank, s)
			}
			m.addMerge(a, b, rank)
		}
		m.init()
		t.bpe = m
		t.bos = id("tokenizer.ggml.bos_token_id", -1)
		t.eos = id("tokenizer.ggml.eos_token_id", -1)
		t.unk = id("tokenizer.ggml.unknown_token_id", -1)
		addBOS = mdBool(md, "tokenizer.ggml.add_bos_token", ggufIgnoreMerges[pre])
		addEOS = mdBool(md, "tokenizer.ggml.add_eos_token", false)
	default:
		return nil, fmt.Errorf("tokenizer.ggml.model %q is not supported (llama, gpt2)", modelName)
	}
	t.pad = id("tokenizer.ggml.padding_token_id", -1)
	if addBOS && t.bos >= 0 {
		t.prefix = []int{t.bos}
	}
	if addEOS && t.eos >= 0 {
		t.suffix = []int{t.eos}
	}
	if t.eos >= 0 {
		t.eosSet = append(t.eosSet, t.eos)
	}
	for _, key := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if v := id(key, -1); v >= 0 && !slices.Contains(t.eosSet, v) {
			t.eosSet = append(t.eosSet, v)
		}
	}

	var addedToks []*AddedToken
	t.pieces = make([][]byte, n)
	for i, tok := range tokens {
		typ := types[i]
		switch typ {
		case ggufControl, ggufUnknown:
			t.special[i] = true
			if tok != "" {
				a := &AddedToken{ID: i, Content: tok, Special: true}
				t.added[i] = a
				addedToks = append(addedToks, a)
			}
		case ggufUserDefined:
			if tok != "" {
				a := &AddedToken{ID: i, Content: tok}
				t.added[i] = a
				addedToks = append(addedToks, a)
			}
		}
		switch {
		case typ == ggufByte:
			if v, ok := parseByteToken(tok); ok {
				t.pieces[i] = []byte{v}
				continue
			}
			t.pieces[i] = []byte(tok)
		case t.spm != nil:
			t.pieces[i] = []byte(strings.ReplaceAll(tok, "\u2581", " "))
		case typ == ggufNormal:
			if raw, ok := byteLevelDecode(tok); ok {
				t.pieces[i] = raw
			} else {
				t.pieces[i] = []byte(tok)
			}
		default:
			t.pieces[i] = []byte(tok)
		}
	}
	// llama.cpp gives Phi-3's special tokens HF's rstrip by model name.
	if name, _ := mdString(md, "general.name"); strings.Contains(strings.ToLower(name), "phi-3") || strings.Contains(strings.ToLower(name), "phi3") {
		for _, a := range addedToks {
			switch a.Content {
			case "<unk>", "<s>", "<|endoftext|>":
			default:
				a.RStrip = true
			}
		}
	}
	t.rawAdded = newAddedMatcher(addedToks, nil)
	if t.spm != nil && t.spmSpacePrefix {
		t.stripStart = 1
	}
	if s, ok := mdString(md, "tokenizer.chat_template"); ok {
		t.templates["default"] = s
	}
	for k, v := range md {
		if name, ok := strings.CutPrefix(k, "tokenizer.chat_template."); ok {
			if s, ok := v.(string); ok {
				t.templates[name] = s
			}
		}
	}
	return t, nil
}

// FromGGUFFile reads the vocabulary of a GGUF file.
func FromGGUFFile(path string) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	t, err := FromGGUFMetadata(f.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// mdArrayLen is the length of a string array under key (0 otherwise).
func mdArrayLen(md map[string]any, key string) int {
	switch v := md[key].(type) {
	case []string:
		return len(v)
	case []any:
		return len(v)
	}
	return 0
}

func mdString(md map[string]any, key string) (string, bool) {
	s, ok := md[key].(string)
	return s, ok
}

func mdBool(md map[string]any, key string, def bool) bool {
	if b, ok := md[key].(bool); ok {
		return b
	}
	return def
}

// anyInt reads an integer from GGUF metadata (any width, as gguf's Int
// getters do) or from JSON-decoded values (whole float64/float32).
func anyInt(v any) (int64, bool) {
	if n, ok := gguf.IntValue(v); ok {
		return n, true
	}
	switch v := v.(type) {
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, false
		}
		return int64(v), true
	case float32:
		if float64(v) != math.Trunc(float64(v)) || math.Abs(float64(v)) > 1<<24 {
			return 0, false
		}
		return int64(v), true
	}
	return 0, false
}

func mdInt(md map[string]any, key string) (int64, bool) { return anyInt(md[key]) }

func mdStrings(md map[string]any, key string) ([]string, bool) {
	switch v := md[key].(type) {
	case []string:
		return v, true
	case []any:
		out := make([]string, len(v))
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

func mdInts(md map[string]any, key string) ([]int64, bool) {
	conv := func(n int, at func(int) (int64, bool)) ([]int64, bool) {
		out := make([]int64, n)
		for i := range out {
			x, ok := at(i)
			if !ok {
				return nil, false
			}
			out[i] = x
		}
		return out, true
	}
	switch v := md[key].(type) {
	case []int32:
		return conv(len(v), func(i int) (int64, bool) { return int64(v[i]), true })
	case []uint32:
		return conv(len(v), func(i int) (int64, bool) { return int64(v[i]), true })
	case []int64:
		return conv(len(v), func(i int) (int64, bool) { return v[i], true })
	case []uint64:
		return conv(len(v), func(i int) (int64, bool) { return anyInt(v[i]) })
	case []int8:
		return conv(len(v), func(i int) (int64, bool) { return int64(v[i]), true })
	case []uint8:
		return conv(len(v), func(i int) (int64, bool) { return int64(v[i]), true })
	case []int16:
		return conv(len(v), func(i int) (int64, bool) { return int64(v[i]), true })
	case []uint16:
		return conv(len(v), func(i int) (int64, bool) { return int64(v[i]), true })
	case []int:
		return conv(len(v), func(i int) (int64, bool) { return int64(v[i]), true })
	case []float64:
		return conv(len(v), func(i int) (int64, bool) { return anyInt(v[i]) })
	case []any:
		return conv(len(v), func(i int) (int64, bool) { return anyInt(v[i]) })
	}
	return nil, false
}

func mdFloats(md map[string]any, key string) ([]float32, bool) {
	switch v := md[key].(type) {
	case []float32:
		return v, true
	case []float64:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, true
	case []any:
		out := make([]float32, len(v))
		for i, x := range v {
			switch f := x.(type) {
			case float64:
				out[i] = float32(f)
			case float32:
				out[i] = f
			default:
				iv, ok := anyInt(x)
				if !ok {
					return nil, false
				}
				out[i] = float32(iv)
			}
		}
		return out, true
	}
	return nil, false
}

// Package synth writes random-weight models of real shapes as GGUF files
// that llama.cpp loads, so benchmarks can run the identical file in cortiq
// and in llama.cpp. The weights are deterministic (a fixed seed per tensor)
// and scaled like trained weights so activations stay finite; the text they
// produce is meaningless, their speed is not.
package synth

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/tensor"
)

// Shape is the architecture of a synthetic model.
type Shape struct {
	Name      string
	Arch      string // GGUF general.architecture: "llama" or "qwen2"
	Hidden    int
	Layers    int
	Heads     int
	KVHeads   int
	FFN       int
	Vocab     int
	Tied      bool
	QKVBias   bool
	RopeTheta float32
	Context   int
	// MoE (Arch "qwen2moe" style is not used: llama.cpp reads llama.expert_*).
	Experts, ExpertsUsed int
}

// Shapes are the shapes `cortiq synth --shape` knows.
var Shapes = map[string]Shape{
	// Llama-3.2-1B.
	"llama-1b": {Name: "llama-1b", Arch: "llama", Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, Tied: true, RopeTheta: 500000, Context: 131072},
	// A draft for llama-1b (speculative decoding): its vocabulary, a
	// small body, random weights of its own and an untied head (a tied
	// random model repeats its last token, as llama-1b does: this one
	// proposes other tokens, so its drafts are rejected).
	"llama-1b-draft": {Name: "llama-1b-draft", Arch: "llama", Hidden: 512, Layers: 4, Heads: 8, KVHeads: 2, FFN: 2048, Vocab: 128256, RopeTheta: 500000, Context: 131072},
	// Qwen2.5-0.5B.
	"qwen-0.5b": {Name: "qwen-0.5b", Arch: "qwen2", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, Tied: true, QKVBias: true, RopeTheta: 1000000, Context: 32768},
	// A Mixtral-style MoE: 8 experts, top-2.
	"moe-8x": {Name: "moe-8x", Arch: "llama", Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8, FFN: 2048, Vocab: 32000, RopeTheta: 1000000, Context: 32768, Experts: 8, ExpertsUsed: 2},
	// Small shapes for tests.
	"tiny":     {Name: "tiny", Arch: "llama", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 512, RopeTheta: 10000, Context: 256},
	"tiny-moe": {Name: "tiny-moe", Arch: "llama", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 512, RopeTheta: 10000, Context: 256, Experts: 4, ExpertsUsed: 2},
}

// ShapeNames lists the known shapes, sorted.
func ShapeNames() []string {
	var n []string
	for k := range Shapes {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

type tensorSpec struct {
	name  string
	shape []int
	codec tensor.Codec
	std   float32
	ones  bool
}

// Write writes the shape as GGUF with every weight in quant (f32, f16,
// q8_0, q4_0, q4_K or q6_K; norms stay f32) to path.
func Write(path string, s Shape, quant tensor.Codec) error {
	m, err := ParseMix(quant.String())
	if err != nil {
		return err
	}
	return WriteMix(path, s, m)
}

// Mix is how a synthetic file's weights are quantized: one codec for every
// weight, or a recipe by tensor (llama.cpp's Q4_K_M).
type Mix struct {
	Name     string
	fileType uint32
	pick     func(kind string, layer, layers int) tensor.Codec
}

// MixNames are the mixes ParseMix knows: one codec throughout, or a
// recipe like llama-quantize's.
var MixNames = []string{"f32", "f16", "q8_0", "q4_0", "q4_K", "q6_K", "q4_K_M",
	"q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q5_K", "iq4_nl", "iq4_xs", "iq3_xxs", "iq3_s",
	"iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m", "tq1_0", "tq2_0", "mxfp4",
	"q2_K_mix", "q3_K_M", "q5_K_M", "iq3_M", "iq2_M", "iq1_M_mix", "mxfp4_moe"}

// fileTypes are llama.cpp's general.file_type values (enum llama_ftype).
var fileTypes = map[string]uint32{
	"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q2_K": 10,
	"q3_K": 11, "q4_K": 14, "q5_K": 16, "q6_K": 18, "iq2_xxs": 19, "iq2_xs": 20, "iq3_xxs": 23,
	"iq1_s": 24, "iq4_nl": 25, "iq3_s": 26, "iq2_s": 28, "iq4_xs": 30, "iq1_m": 31,
	"tq1_0": 36, "tq2_0": 37, "mxfp4": 38,
	"q4_K_M": 15, "q2_K_mix": 10, "q3_K_M": 12, "q5_K_M": 17, "iq3_M": 27, "iq2_M": 29,
	"iq1_M_mix": 31, "mxfp4_moe": 38,
}

// moreBits is llama.cpp's use_more_bits: the first and last eighth of the
// layers and every third between.
func moreBits(l, n int) bool { return l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2 }

// recipe builds a mix: base for every weight unless a kind has its own
// codec; kinds listed in more take the better codec in moreBits layers.
func recipe(base, output, embd tensor.Codec, kinds map[string]tensor.Codec, more map[string]tensor.Codec) func(string, int, int) tensor.Codec {
	return func(kind string, l, n int) tensor.Codec {
		switch kind {
		case "output":
			return output
		case "embd":
			return embd
		}
		if c, ok := more[kind]; ok && moreBits(l, n) {
			return c
		}
		if c, ok := kinds[kind]; ok {
			return c
		}
		return base
	}
}

// ParseMix finds a mix by name: a codec name for one codec throughout, or
// a recipe shaped like llama-quantize's (the tensor kinds it gives more
// bits, simplified):
//
//	q4_K_M     q4_K; q6_K output (and a tied embedding), attn_v/ffn_down q6_K in moreBits layers
//	q5_K_M     q5_K; the same with q6_K
//	q3_K_M     q3_K; q6_K output, attn_output q4_K, attn_v/ffn_down q5_K (moreBits) or q4_K
//	q2_K_mix   q2_K; q6_K output, attn_v and ffn_down q3_K
//	iq3_M      iq3_s; q6_K output, attn_v q4_K, ffn_down iq4_xs (moreBits)
//	iq2_M      iq2_xs with q4_K embeddings; q5_K output, attn_v q4_K, ffn_down iq3_s (moreBits)
//	iq1_M_mix  iq1_m; q4_K embedding, q5_K output, attn_v iq4_xs, ffn_down iq2_xs
//	mxfp4_moe  mxfp4 feed-forward (experts included); q8_0 elsewhere
func ParseMix(name string) (Mix, error) {
	ft, ok := fileTypes[name]
	var pick func(string, int, int) tensor.Codec
	const (
		q2, q3, q4, q5, q6, q8 = tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.Q8_0
	)
	switch name {
	case "q4_K_M":
		pick = recipe(q4, q6, q4, nil, map[string]tensor.Codec{"attn_v": q6, "ffn_down": q6, "ffn_down_exps": q6})
	case "q5_K_M":
		pick = recipe(q5, q6, q5, nil, map[string]tensor.Codec{"attn_v": q6, "ffn_down": q6, "ffn_down_exps": q6})
	case "q3_K_M":
		pick = recipe(q3, q6, q3, map[string]tensor.Codec{"attn_output": q4, "attn_v": q4, "ffn_down": q4, "ffn_down_exps": q4},
			map[string]tensor.Codec{"attn_v": q5, "ffn_down": q5, "ffn_down_exps": q5})
	case "q2_K_mix":
		pick = recipe(q2, q6, q2, map[string]tensor.Codec{"attn_v": q3, "ffn_down": q3, "ffn_down_exps": q3}, nil)
	case "iq3_M":
		pick = recipe(tensor.IQ3_S, q6, tensor.IQ3_S, map[string]tensor.Codec{"attn_v": q4},
			map[string]tensor.Codec{"ffn_down": tensor.IQ4_XS, "ffn_down_exps": tensor.IQ4_XS})
	case "iq2_M":
		pick = recipe(tensor.IQ2_XS, q5, q4, map[string]tensor.Codec{"attn_v": q4},
			map[string]tensor.Codec{"ffn_down": tensor.IQ3_S, "ffn_down_exps": tensor.IQ3_S})
	case "iq1_M_mix":
		pick = recipe(tensor.IQ1_M, q5, q4, map[string]tensor.Codec{"attn_v": tensor.IQ4_XS, "ffn_down": tensor.IQ2_XS, "ffn_down_exps": tensor.IQ2_XS}, nil)
	case "mxfp4_moe":
		m := tensor.MXFP4
		pick = recipe(q8, q8, q8, map[string]tensor.Codec{"ffn_gate": m, "ffn_up": m, "ffn_down": m,
			"ffn_gate_exps": m, "ffn_up_exps": m, "ffn_down_exps": m}, nil)
	default:
		q, err := tensor.ParseCodec(name)
		if !ok || err != nil {
			return Mix{}, fmt.Errorf("synth: quant %q: want one of %s", name, strings.Join(MixNames, ", "))
		}
		pick = func(string, int, int) tensor.Codec { return q }
	}
	if !ok {
		return Mix{}, fmt.Errorf("synth: quant %q: want one of %s", name, strings.Join(MixNames, ", "))
	}
	return Mix{Name: name, fileType: ft, pick: pick}, nil
}

// fallback is the codec llama.cpp writes instead of a 256-element codec
// for rows that are not a multiple of 256 (llama_tensor_get_type); q4_K
// and q6_K keep this package's earlier choice, q8_0.
func fallback(c tensor.Codec) tensor.Codec {
	switch c {
	case tensor.Q2_K, tensor.Q3_K, tensor.IQ4_XS, tensor.IQ3_XXS, tensor.IQ3_S,
		tensor.IQ2_XXS, tensor.IQ2_XS, tensor.IQ2_S, tensor.IQ1_S, tensor.IQ1_M:
		return tensor.IQ4_NL
	case tensor.Q5_K:
		return tensor.Q5_1
	case tensor.TQ1_0, tensor.TQ2_0:
		return tensor.Q4_0
	}
	return tensor.Q8_0
}

// WriteMix writes the shape as GGUF with weights quantized by m (norms
// stay f32) to path. A weight whose rows are not a multiple of its codec's
// block is written in llama.cpp's fallback codec (see fallback).
func WriteMix(path string, s Shape, m Mix) error {
	w, err := gguf.Create(path)
	if err != nil {
		return err
	}
	specs := tensorsOf(s, m)
	if err := addMetadata(w, s, m.fileType); err != nil {
		w.Close()
		return err
	}
	for _, t := range specs {
		if err := w.AddTensor(t.name, t.codec, t.shape); err != nil {
			w.Close()
			return err
		}
	}
	for i, t := range specs {
		data, err := generate(t, uint64(i)+1)
		if err != nil {
			w.Close()
			return fmt.Errorf("synth: %s: %w", t.name, err)
		}
		if err := w.WriteTensorData(t.name, data); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

func tensorsOf(s Shape, m Mix) []tensorSpec {
	hd := s.Hidden / s.Heads
	std := float32(1 / math.Sqrt(float64(s.Hidden)))
	var out []tensorSpec
	layer := -1
	add := func(name, kind string, std float32, shape ...int) {
		c := m.pick(kind, layer, s.Layers)
		if shape[len(shape)-1]%c.BlockLen() != 0 {
			c = fallback(c)
		}
		out = append(out, tensorSpec{name: name, shape: shape, codec: c, std: std})
	}
	vec := func(name string, std float32, n int) {
		out = append(out, tensorSpec{name: name, shape: []int{n}, codec: tensor.F32, std: std})
	}
	norm := func(name string, n int) {
		out = append(out, tensorSpec{name: name, shape: []int{n}, codec: tensor.F32, ones: true})
	}
	embd := "embd"
	if s.Tied {
		embd = "output" // the embedding is the output projection too
	}
	add("token_embd.weight", embd, 1, s.Vocab, s.Hidden)
	norm("output_norm.weight", s.Hidden)
	if !s.Tied {
		add("output.weight", "output", std, s.Vocab, s.Hidden)
	}
	for l := 0; l < s.Layers; l++ {
		layer = l
		p := fmt.Sprintf("blk.%d.", l)
		norm(p+"attn_norm.weight", s.Hidden)
		add(p+"attn_q.weight", "attn_q", std, s.Heads*hd, s.Hidden)
		add(p+"attn_k.weight", "attn_k", std, s.KVHeads*hd, s.Hidden)
		add(p+"attn_v.weight", "attn_v", std, s.KVHeads*hd, s.Hidden)
		if s.QKVBias {
			vec(p+"attn_q.bias", 0.02, s.Heads*hd)
			vec(p+"attn_k.bias", 0.02, s.KVHeads*hd)
			vec(p+"attn_v.bias", 0.02, s.KVHeads*hd)
		}
		add(p+"attn_output.weight", "attn_output", std, s.Hidden, s.Heads*hd)
		norm(p+"ffn_norm.weight", s.Hidden)
		if s.Experts > 0 {
			out = append(out, tensorSpec{name: p + "ffn_gate_inp.weight", shape: []int{s.Experts, s.Hidden}, codec: tensor.F32, std: std})
			add(p+"ffn_gate_exps.weight", "ffn_gate_exps", std, s.Experts, s.FFN, s.Hidden)
			add(p+"ffn_up_exps.weight", "ffn_up_exps", std, s.Experts, s.FFN, s.Hidden)
			add(p+"ffn_down_exps.weight", "ffn_down_exps", float32(1/math.Sqrt(float64(s.FFN))), s.Experts, s.Hidden, s.FFN)
		} else {
			add(p+"ffn_gate.weight", "ffn_gate", std, s.FFN, s.Hidden)
			add(p+"ffn_up.weight", "ffn_up", std, s.FFN, s.Hidden)
			add(p+"ffn_down.weight", "ffn_down", float32(1/math.Sqrt(float64(s.FFN))), s.Hidden, s.FFN)
		}
	}
	return out
}

func addMetadata(w *gguf.Writer, s Shape, fileType uint32) error {
	a := s.Arch
	hd := s.Hidden / s.Heads
	md := []struct {
		k string
		v any
	}{
		{"general.architecture", a},
		{"general.name", "cortiq-synth-" + s.Name},
		{"general.file_type", fileType},
		{a + ".context_length", uint32(s.Context)},
		{a + ".embedding_length", uint32(s.Hidden)},
		{a + ".block_count", uint32(s.Layers)},
		{a + ".feed_forward_length", uint32(s.FFN)},
		{a + ".attention.head_count", uint32(s.Heads)},
		{a + ".attention.head_count_kv", uint32(s.KVHeads)},
		{a + ".attention.layer_norm_rms_epsilon", float32(1e-5)},
		{a + ".rope.freq_base", s.RopeTheta},
		{a + ".rope.dimension_count", uint32(hd)},
		{a + ".vocab_size", uint32(s.Vocab)},
	}
	if s.Experts > 0 {
		md = append(md, struct {
			k string
			v any
		}{a + ".expert_count", uint32(s.Experts)}, struct {
			k string
			v any
		}{a + ".expert_used_count", uint32(s.ExpertsUsed)})
	}
	for _, kv := range md {
		if err := w.AddMetadata(kv.k, kv.v); err != nil {
			return err
		}
	}
	tokens, scores, types := vocab(s.Vocab)
	for _, kv := range []struct {
		k string
		v any
	}{
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
		{"tokenizer.ggml.add_bos_token", true},
	} {
		if err := w.AddMetadata(kv.k, kv.v); err != nil {
			return err
		}
	}
	return nil
}

// vocab builds a SentencePiece-style vocabulary of n entries: the three
// specials, the 256 byte tokens, the printable ASCII letters with and
// without the word-start mark, then filler pieces.
func vocab(n int) ([]string, []float32, []int32) {
	tokens := make([]string, 0, n)
	types := make([]int32, 0, n)
	add := func(t string, typ int32) {
		if len(tokens) < n {
			tokens = append(tokens, t)
			types = append(types, typ)
		}
	}
	add("<unk>", 2)
	add("<s>", 3)
	add("</s>", 3)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 6)
	}
	for c := 'a'; c <= 'z'; c++ {
		add(string(c), 1)
		add("▁"+string(c), 1)
	}
	for i := 0; len(tokens) < n; i++ {
		add(fmt.Sprintf("▁w%d", i), 1)
	}
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = -float32(i)
	}
	return tokens, scores, types
}

// generate makes one tensor's encoded bytes, rows in parallel.
func generate(t tensorSpec, seed uint64) ([]byte, error) {
	cols := t.shape[len(t.shape)-1]
	rows := 1
	for _, d := range t.shape[:len(t.shape)-1] {
		rows *= d
	}
	rb, err := t.codec.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	out := make([]byte, rows*rb)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	chunk := (rows + workers - 1) / workers
	for w := 0; w < workers; w++ {
		r0, r1 := w*chunk, min((w+1)*chunk, rows)
		if r0 >= r1 {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, cols)
			for r := r0; r < r1; r++ {
				rng := seed*0x9E3779B97F4A7C15 ^ uint64(r+1)*0xD1B54A32D192ED03
				for i := range row {
					if t.ones {
						row[i] = 1
						continue
					}
					rng ^= rng << 13
					rng ^= rng >> 7
					rng ^= rng << 17
					// Uniform in [-sqrt(3), sqrt(3)]·std has the std of a normal.
					u := float32(rng>>40)/float32(1<<24)*2 - 1
					row[i] = u * 1.7320508 * t.std
				}
				if err := tensor.Quantize(out[r*rb:(r+1)*rb], t.codec, row); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

// ParseShape finds a shape by name.
func ParseShape(name string) (Shape, error) {
	s, ok := Shapes[name]
	if !ok {
		return Shape{}, fmt.Errorf("synth: unknown shape %q (known: %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return s, nil
}

package writer

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/internal/ggufarch"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/model/family"
	"github.com/cortiq/cortiq/tensor"
)

// ggufTokenizerTypes gives the GGUF value type of the standard tokenizer
// keys, which the JSON of gguf_vocab.json does not carry.
var ggufTokenizerTypes = map[string]string{
	"tokenizer.ggml.model":                    "string",
	"tokenizer.ggml.pre":                      "string",
	"tokenizer.chat_template":                 "string",
	"tokenizer.ggml.tokens":                   "[]string",
	"tokenizer.ggml.merges":                   "[]string",
	"tokenizer.ggml.scores":                   "[]float32",
	"tokenizer.ggml.token_type":               "[]int32",
	"tokenizer.ggml.precompiled_charsmap":     "[]uint8",
	"tokenizer.ggml.add_bos_token":            "bool",
	"tokenizer.ggml.add_eos_token":            "bool",
	"tokenizer.ggml.add_sep_token":            "bool",
	"tokenizer.ggml.add_space_prefix":         "bool",
	"tokenizer.ggml.remove_extra_whitespaces": "bool",
	"tokenizer.ggml.token_type_count":         "uint32",
}

// ggufTypedTokenizerValue restores a GGUF value from gguf_vocab.json: the
// standard keys get their llama.cpp types, *_token_id keys uint32, others
// the natural type of their JSON.
func ggufTypedTokenizerValue(key string, raw json.RawMessage) (any, error) {
	typ := ggufTokenizerTypes[key]
	if typ == "" && strings.HasSuffix(key, "_token_id") {
		typ = "uint32"
	}
	decode := func(v any) (any, error) {
		if err := json.Unmarshal(raw, v); err != nil {
			return nil, fmt.Errorf("tokenizer key %s: %w", key, err)
		}
		return reflectDeref(v), nil
	}
	switch typ {
	case "string":
		return decode(new(string))
	case "[]string":
		return decode(new([]string))
	case "[]float32":
		return decode(new([]float32))
	case "[]int32":
		return decode(new([]int32))
	case "[]uint8":
		var ints []int
		if err := json.Unmarshal(raw, &ints); err != nil {
			return nil, fmt.Errorf("tokenizer key %s: %w", key, err)
		}
		out := make([]uint8, len(ints))
		for i, x := range ints {
			out[i] = uint8(x)
		}
		return out, nil
	case "bool":
		return decode(new(bool))
	case "uint32":
		return decode(new(uint32))
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("tokenizer key %s: %w", key, err)
	}
	switch v := v.(type) {
	case string, bool:
		return v, nil
	case float64:
		if v == math.Trunc(v) && v >= math.MinInt32 && v <= math.MaxInt32 {
			return int32(v), nil
		}
		return float32(v), nil
	case []any:
		return decode(new([]string))
	}
	return nil, fmt.Errorf("tokenizer key %s: cannot restore a GGUF value from %s", key, raw)
}

func reflectDeref(v any) any {
	switch p := v.(type) {
	case *string:
		return *p
	case *[]string:
		return *p
	case *[]float32:
		return *p
	case *[]int32:
		return *p
	case *bool:
		return *p
	case *uint32:
		return *p
	}
	return v
}

// SaveGGUF writes m as a GGUF v3 file for llama.cpp (through a temporary
// file renamed into place, so a failed save leaves no partial file),
// re-encoding weights as opts says (SaveCMF's rules; the codec must be one
// GGUF has). It is the inverse of importer.FromGGUF: architecture metadata
// under the llama.cpp keys, the tokenizer (from a "gguf" TokenizerData;
// without one, tokenizer.ggml.model is "no_vocab"), and the weights in their
// codecs, converted where GGUF's conventions differ from the engine's:
//   - llama/mistral with rotate-half (NEOX) RoPE get their q/k rows permuted
//     to the interleaved layout llama.cpp's "llama" expects;
//   - Gemma norms with the (1+w) convention get 1 added (as f32);
//   - Phi-3 q/k/v and gate/up are fused into attn_qkv and ffn_up;
//   - Llama 3 RoPE scaling becomes a rope_freqs tensor;
//   - a Hugging Face tokenizer is carried as its files (tokenizer.json
//     under tokenizer.huggingface.json, the others under
//     cortiq.huggingface.<name>), which importer.FromGGUF reads back;
//     llama.cpp, which needs a vocabulary of its own, sees
//     tokenizer.ggml.model "no_vocab";
//   - gpt-oss's pre-FFN norm is named post_attention_norm, as llama.cpp
//     names it, and its YaRN attention factor is stored relative to
//     llama.cpp's built-in 1+0.1·ln(factor).
//
// It refuses a model GGUF cannot express exactly: it re-derives the Arch
// from what it would write (as importer.FromGGUF does) and fails, naming
// the difference, unless that matches m.Arch.
func SaveGGUF(m *model.Model, path string, opts SaveOptions) error {
	target, requant := opts.Quant, !opts.Keep
	if requant && (!target.Valid() || target == tensor.I32) {
		return fmt.Errorf("gguf: %s: cannot convert weights to %s", path, target)
	}
	src, ok := family.Of(m.Arch.Family)
	if !ok || src.GGUFOut == "" {
		return fmt.Errorf("gguf: %s: family %q has no GGUF mapping (supported: %s)", path, m.Arch.Family, strings.Join(family.GGUFOutNames(), ", "))
	}
	arch := src.GGUFOut
	out, ok := family.GGUF(arch)
	if !ok {
		return fmt.Errorf("gguf: %s: family %q is written as %q, which the GGUF reader does not know", path, m.Arch.Family, arch)
	}
	a := &m.Arch
	if err := a.Validate(); err != nil {
		return fmt.Errorf("gguf: %s: %w", path, err)
	}
	l0 := a.Layers[0]
	var moe *model.MoE
	for i, l := range a.Layers {
		if l.Mixer != model.MixerAttention || (l.FFN != model.FFNDense && (l.FFN != model.FFNMoE || out.MoE != family.MoEGptOss)) {
			return fmt.Errorf("gguf: %s: layer %d: only attention layers with a dense FFN (or gpt-oss's MoE) are supported", path, i)
		}
		if l.MoE != nil && moe == nil {
			moe = l.MoE
		}
	}
	at := l0.Attn
	meta := []struct {
		k string
		v any
	}{
		{"general.architecture", arch},
		{"general.name", "cortiq"},
	}
	add := func(k string, v any) {
		meta = append(meta, struct {
			k string
			v any
		}{k, v})
	}
	ak := func(k string) string { return arch + "." + k }
	ctx := a.Context
	if ctx <= 0 {
		ctx = 2048
	}
	add(ak("context_length"), uint32(ctx))
	add(ak("embedding_length"), uint32(a.Hidden))
	add(ak("block_count"), uint32(len(a.Layers)))
	if moe != nil {
		// llama.cpp's gpt-oss converter writes intermediate_size to both.
		add(ak("feed_forward_length"), uint32(moe.ExpertHidden))
		add(ak("expert_count"), uint32(moe.Experts))
		add(ak("expert_used_count"), uint32(moe.TopK))
		add(ak("expert_feed_forward_length"), uint32(moe.ExpertHidden))
	} else {
		add(ak("feed_forward_length"), uint32(l0.FFNHidden))
	}
	add(ak("attention.head_count"), uint32(at.Heads))
	add(ak("attention.head_count_kv"), uint32(at.KVHeads))
	add(ak("attention.key_length"), uint32(at.HeadDim))
	add(ak("attention.value_length"), uint32(at.HeadDim))
	add(ak("attention.layer_norm_rms_epsilon"), a.NormEps)
	add(ak("rope.freq_base"), float32(at.Rope.Theta))
	add(ak("rope.dimension_count"), uint32(at.Rope.Dims))
	add(ak("vocab_size"), uint32(a.Vocab))
	// Gemma 3 keeps its global layers' RoPE on the model keys.
	rope := at.Rope
	window := 0
	for _, l := range a.Layers {
		if l.Attn.Window > 0 && window == 0 {
			window = l.Attn.Window
		}
	}
	if out.GGUFSliding == family.SlideGemma3 {
		for _, l := range a.Layers {
			if l.Attn.Window == 0 {
				rope = l.Attn.Rope
				break
			}
		}
		for i := range meta {
			if meta[i].k == ak("rope.freq_base") {
				meta[i].v = float32(rope.Theta)
			}
		}
		for _, l := range a.Layers {
			if l.Attn.Window > 0 && l.Attn.Rope.Theta != 10000 {
				add(ak("rope.freq_base_swa"), float32(l.Attn.Rope.Theta))
				break
			}
		}
	}
	switch rope.Scaling.Type {
	case "":
	case "linear":
		add(ak("rope.scaling.type"), "linear")
		add(ak("rope.scaling.factor"), float32(rope.Scaling.Factor))
	case "yarn":
		add(ak("rope.scaling.type"), "yarn")
		add(ak("rope.scaling.factor"), float32(rope.Scaling.Factor))
		add(ak("rope.scaling.original_context_length"), uint32(rope.Scaling.OriginalContext))
		add(ak("rope.scaling.yarn_beta_fast"), float32(rope.Scaling.BetaFast))
		add(ak("rope.scaling.yarn_beta_slow"), float32(rope.Scaling.BetaSlow))
		if af := rope.Scaling.AttnFactor; out.GGUFYarnMscale {
			if rel := af / ggufarch.YarnMscale(rope.Scaling.Factor); af != 0 && rel != 1 {
				add(ak("rope.scaling.attn_factor"), float32(rel))
			}
		} else if af != 0 {
			add(ak("rope.scaling.attn_factor"), float32(af))
		}
	case "llama3":
		if rope.Scaling.OriginalContext != 8192 {
			add(ak("rope.scaling.original_context_length"), uint32(rope.Scaling.OriginalContext))
		}
	default:
		return fmt.Errorf("gguf: %s: rope scaling %q has no GGUF form", path, rope.Scaling.Type)
	}
	if window > 0 {
		add(ak("attention.sliding_window"), uint32(window))
	}
	if at.Softcap != 0 {
		add(ak("attn_logit_softcapping"), at.Softcap)
	}
	if a.FinalSoftcap != 0 {
		add(ak("final_logit_softcapping"), a.FinalSoftcap)
	}

	// Tokenizer: the GGUF material if the model has it, special ids from
	// the Arch (which is what the engine stops on).
	ids := map[string]bool{"tokenizer.ggml.bos_token_id": true, "tokenizer.ggml.eos_token_id": true, "tokenizer.ggml.eot_token_id": true, "tokenizer.ggml.eom_token_id": true}
	hasModel := false
	if t := m.Tokenizer; t != nil && t.Kind == "gguf" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(t.Files["gguf_vocab.json"], &obj); err != nil {
			return fmt.Errorf("gguf: %s: gguf_vocab.json: %w", path, err)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if ids[k] {
				continue
			}
			v, err := ggufTypedTokenizerValue(k, obj[k])
			if err != nil {
				return fmt.Errorf("gguf: %s: %w", path, err)
			}
			add(k, v)
			hasModel = hasModel || k == "tokenizer.ggml.model"
		}
	}
	if t := m.Tokenizer; t != nil && t.Kind == "hf" {
		for _, name := range slices.Sorted(maps.Keys(t.Files)) {
			b := t.Files[name]
			if !utf8.Valid(b) {
				return fmt.Errorf("gguf: %s: tokenizer file %s is not UTF-8", path, name)
			}
			if name == "tokenizer.json" {
				add(ggufarch.HFTokenizerKey, string(b))
			} else {
				add(ggufarch.HFFilePrefix+name, string(b))
			}
		}
	}
	if !hasModel {
		add("tokenizer.ggml.model", "no_vocab")
	}
	if a.BOS >= 0 {
		add("tokenizer.ggml.bos_token_id", uint32(a.BOS))
	}
	for i, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if i < len(a.EOS) {
			add(k, uint32(a.EOS[i]))
		}
	}

	// Tensors, converted to GGUF conventions.
	w := model.MapWeights{}
	for _, n := range m.Weights.Names() {
		t, ok := m.Weights.Tensor(n)
		if !ok {
			return fmt.Errorf("gguf: %s: tensor %q listed but not readable", path, n)
		}
		w[n] = t
	}
	expect := *a
	expect.Family = arch
	expect.Context = ctx
	expect.Layers = make([]model.Layer, len(a.Layers))
	for i, l := range a.Layers {
		l.Attn = new(*l.Attn)
		expect.Layers[i] = l
	}
	if out.GGUFRope == model.RopeInterleaved {
		for i, l := range expect.Layers {
			if l.Attn.Rope.Style == model.RopeInterleaved {
				continue
			}
			if l.Attn.Rope.Dims != l.Attn.HeadDim {
				return fmt.Errorf("gguf: %s: layer %d: partial NEOX RoPE cannot be expressed as GGUF %s", path, i, arch)
			}
			for _, s := range []struct {
				name  string
				heads int
			}{{model.AttnQ, l.Attn.Heads}, {model.AttnK, l.Attn.KVHeads}} {
				n := model.LayerTensor(i, s.name)
				t, ok := w[n]
				if !ok {
					return fmt.Errorf("gguf: %s: missing tensor %s", path, n)
				}
				p, err := ggufPermuteRows(t, s.heads)
				if err != nil {
					return fmt.Errorf("gguf: %s: %w", path, err)
				}
				w[n] = p
			}
			l.Attn.Rope.Style = model.RopeInterleaved
		}
	}
	if a.Norm == model.NormRMSPlusOne { // GGUF norms are plain: llama.cpp adds the 1
		for n, t := range w {
			if strings.HasSuffix(n, "norm.weight") {
				p, err := ggufAddOne(t)
				if err != nil {
					return fmt.Errorf("gguf: %s: %w", path, err)
				}
				w[n] = p
			}
		}
		expect.Norm = model.NormRMS
	}
	if out.GGUFFusedSplit {
		for i := range expect.Layers {
			if err := ggufFuseRows(w, model.LayerTensor(i, "attn_qkv.weight"),
				model.LayerTensor(i, model.AttnQ), model.LayerTensor(i, model.AttnK), model.LayerTensor(i, model.AttnV)); err != nil {
				return fmt.Errorf("gguf: %s: %w", path, err)
			}
			if err := ggufFuseRows(w, model.LayerTensor(i, model.FFNUp),
				model.LayerTensor(i, model.FFNGate), model.LayerTensor(i, model.FFNUp)); err != nil {
				return fmt.Errorf("gguf: %s: %w", path, err)
			}
		}
	}
	if rope.Scaling.Type == "llama3" {
		w["rope_freqs.weight"] = ggufLlama3Freqs(rope)
	}
	if out.GGUFFFNNorm != "" {
		for i := range expect.Layers {
			n := model.LayerTensor(i, model.FFNNorm)
			if t, ok := w[n]; ok {
				delete(w, n)
				r := *t
				r.Name = model.LayerTensor(i, out.GGUFFFNNorm)
				w[r.Name] = &r
			}
		}
	}

	// Refuse what would not read back as the same Arch.
	mf := &gguf.File{Name: path, Metadata: map[string]any{}}
	for _, kv := range meta {
		mf.Metadata[kv.k] = kv.v
		mf.Keys = append(mf.Keys, kv.k)
	}
	check := model.MapWeights{}
	maps.Copy(check, w)
	if out.GGUFFFNNorm != "" {
		for n, t := range check {
			c := *t
			check[n] = &c // the rename must not touch w's tensors
		}
	}
	if err := ggufarch.Canonicalize(mf, out, check, nil); err != nil {
		return err
	}
	got, err := ggufarch.Arch(mf, out, check)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, expect) {
		gj, _ := json.Marshal(got)
		ej, _ := json.Marshal(expect)
		return fmt.Errorf("gguf: %s: the model cannot be expressed in GGUF %s exactly:\n  would read back as %s\n  model is           %s", path, arch, gj, ej)
	}

	// Re-encoding as opts says happens as each tensor is written, after the
	// conversions above (which work on the source encodings).
	names := tensorOrder(slices.Collect(maps.Keys(w)))
	codecs := make(map[string]tensor.Codec, len(names))
	for _, n := range names {
		codecs[n] = w[n].Codec
		if requant && shouldConvert(w[n], target) {
			codecs[n] = target
		}
	}
	tmp := path + ".tmp"
	gw, err := gguf.Create(tmp)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		gw.Close()
		os.Remove(tmp)
		return err
	}
	for _, kv := range meta {
		if err := gw.AddMetadata(kv.k, kv.v); err != nil {
			return fail(err)
		}
	}
	for _, n := range names {
		if err := gw.AddTensor(n, codecs[n], w[n].Shape); err != nil {
			return fail(err)
		}
	}
	for _, n := range names {
		t := w[n]
		if codecs[n] != t.Codec {
			if t, err = saveEncode(t, target, opts); err != nil {
				return fail(fmt.Errorf("gguf: %s: tensor %q: %w", path, n, err))
			}
		}
		if err := gw.WriteTensor(t); err != nil {
			return fail(err)
		}
	}
	if err := gw.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// ggufPermuteRows reorders the rows of a q or k projection from rotate-half
// pairing (i, i+d/2) to interleaved pairing (2i, 2i+1) within each head, as
// llama.cpp's converter does for "llama" models.
func ggufPermuteRows(t *tensor.Tensor, heads int) (*tensor.Tensor, error) {
	if len(t.Shape) != 2 || heads <= 0 || t.Shape[0]%heads != 0 || (t.Shape[0]/heads)%2 != 0 {
		return nil, fmt.Errorf("tensor %s: shape %v cannot be split into %d heads of even size", t.Name, t.Shape, heads)
	}
	rb, err := t.Codec.RowBytes(t.Shape[1])
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	d := t.Shape[0] / heads
	out := make([]byte, len(t.Data))
	for h := range heads {
		for i := range d / 2 {
			for two := range 2 {
				src := h*d + two*(d/2) + i
				dst := h*d + 2*i + two
				copy(out[dst*rb:(dst+1)*rb], t.Data[src*rb:(src+1)*rb])
			}
		}
	}
	return &tensor.Tensor{Name: t.Name, Codec: t.Codec, Shape: slices.Clone(t.Shape), Data: out}, nil
}

// ggufAddOne turns a (1+w) norm weight into the plain one GGUF Gemma stores.
func ggufAddOne(t *tensor.Tensor) (*tensor.Tensor, error) {
	x := make([]float32, t.Elements())
	if err := tensor.Dequantize(x, t.Codec, t.Data); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	for i := range x {
		x[i]++
	}
	out := &tensor.Tensor{Name: t.Name, Codec: tensor.F32, Shape: slices.Clone(t.Shape), Data: make([]byte, 4*len(x))}
	if err := tensor.Quantize(out.Data, tensor.F32, x); err != nil {
		return nil, err
	}
	return out, nil
}

// ggufFuseRows replaces parts (in order) by one tensor stacking their rows.
func ggufFuseRows(w model.MapWeights, fused string, parts ...string) error {
	var first *tensor.Tensor
	rows := 0
	var data []byte
	for _, p := range parts {
		t, ok := w[p]
		if !ok {
			return fmt.Errorf("missing tensor %s", p)
		}
		if len(t.Shape) != 2 || (first != nil && (t.Codec != first.Codec || t.Shape[1] != first.Shape[1])) {
			return fmt.Errorf("tensor %s (%s %v) cannot be fused into %s", p, t.Codec, t.Shape, fused)
		}
		if first == nil {
			first = t
		}
		rows += t.Shape[0]
		data = append(data, t.Data...)
	}
	for _, p := range parts {
		delete(w, p)
	}
	w[fused] = &tensor.Tensor{Name: fused, Codec: first.Codec, Shape: []int{rows, first.Shape[1]}, Data: data}
	return nil
}

// ggufLlama3Freqs computes llama.cpp's rope_freqs divisors for Llama 3
// scaling (the inverse of ggufLlama3Scaling).
func ggufLlama3Freqs(r model.Rope) *tensor.Tensor {
	s := r.Scaling
	n := r.Dims / 2
	div := make([]float32, n)
	orig := float64(s.OriginalContext)
	lowWave, highWave := orig/s.LowFreqFactor, orig/s.HighFreqFactor
	for i := range div {
		freq := math.Pow(r.Theta, -float64(2*i)/float64(r.Dims))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			div[i] = 1
		case wave > lowWave:
			div[i] = float32(s.Factor)
		default:
			smooth := (orig/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			div[i] = float32(1 / ((1-smooth)/s.Factor + smooth))
		}
	}
	data := make([]byte, 4*n)
	tensor.Quantize(data, tensor.F32, div)
	return &tensor.Tensor{Name: "rope_freqs.weight", Codec: tensor.F32, Shape: []int{n}, Data: data}
}

package importer

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// GGUF architectures FromGGUF understands, with the RoPE pairing llama.cpp
// uses for each: its converter permutes the q/k rows of "llama" (and
// "mistral") models so that rope mode NORM (interleaved pairs) applies; the
// others keep Hugging Face's rotate-half layout (NEOX).
var ggufFamilies = map[string]model.RopeStyle{
	"llama":   model.RopeInterleaved,
	"mistral": model.RopeInterleaved,
	"qwen2":   model.RopeNeoX,
	"qwen3":   model.RopeNeoX,
	"gemma":   model.RopeNeoX,
	"gemma2":  model.RopeNeoX,
	"gemma3":  model.RopeNeoX,
	"phi3":    model.RopeNeoX,
	// Mixture-of-experts variants (Mixtral is "llama" with expert tensors).
	"qwen2moe": model.RopeNeoX,
	"qwen3moe": model.RopeNeoX,
	// gpt-oss: sinks, alternating sliding/full layers, YaRN, biases,
	// clamped-SwiGLU experts (llama.cpp's LLM_ARCH_OPENAI_MOE).
	"gpt-oss": model.RopeNeoX,
}

// FromGGUF imports a GGUF model of the llama family (general.architecture
// llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe, gemma, gemma2, gemma3 or
// phi3; Mixtral is llama with stacked expert tensors). Weights keep
// their GGUF encoding (f32, f16, bf16, q8_0, q4_0, q4_K, q6_K) and alias the
// memory-mapped file; Model.Close releases it. A tensor of another type
// (Q5_K, IQ4_XS, ...) makes the import fail naming the tensor and its type.
//
// Phi-3's fused attn_qkv and gate+up ffn_up are split into the canonical
// q/k/v and gate/up tensors without copying (row ranges of the mapping).
// Gemma norms need no +1: llama.cpp's converter already added it, so GGUF
// Gemma norms are plain RMS norms.
//
// Model.Source names the file and its size but leaves SHA256 empty, because
// hashing a multi-gigabyte file on every open is too slow for inference;
// SaveCMF adds it (from Source.Dir) when the model is written as CMF.
func FromGGUF(path string) (*model.Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := ggufModel(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// GGUFProvenance describes a GGUF file for CMF provenance, with its SHA-256
// computed by streaming the file.
func GGUFProvenance(path string) (model.Provenance, error) {
	sum, n, err := fileSHA256(context.Background(), path)
	if err != nil {
		return model.Provenance{}, fmt.Errorf("gguf: %w", err)
	}
	return model.Provenance{Format: "gguf", Files: []model.SourceFile{{Name: filepath.Base(path), Size: n, SHA256: sum}}}, nil
}

// GGUFTokenizer collects the tokenizer material of a GGUF file: every
// "tokenizer." metadata key, serialized as one JSON object (arrays as JSON
// arrays) under the file name gguf_vocab.json. It is nil when the file has no
// tokenizer keys. Strings that are not valid UTF-8 cannot be represented in
// JSON and come out with U+FFFD replacements; no known vocabulary has them.
func GGUFTokenizer(f *gguf.File) (*model.TokenizerData, error) {
	obj := map[string]any{}
	for _, k := range f.Keys {
		if !strings.HasPrefix(k, "tokenizer.") {
			continue
		}
		obj[k] = ggufJSONValue(f.Metadata[k])
	}
	if len(obj) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: tokenizer metadata: %w", f.Name, err)
	}
	return &model.TokenizerData{Kind: "gguf", Files: map[string][]byte{"gguf_vocab.json": b}}, nil
}

// ggufJSONValue makes a metadata value JSON-encodable: JSON has no NaN or
// infinity, so those floats become 0 and the largest finite values.
func ggufJSONValue(v any) any {
	switch v := v.(type) {
	case float32:
		return float32(ggufFinite(float64(v), math.MaxFloat32))
	case float64:
		return ggufFinite(v, math.MaxFloat64)
	case []float32:
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(ggufFinite(float64(x), math.MaxFloat32))
		}
		return out
	case []float64:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = ggufFinite(x, math.MaxFloat64)
		}
		return out
	case []uint8:
		// encoding/json would write base64; keep it an array of numbers.
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = ggufJSONValue(x)
		}
		return out
	}
	return v
}

func ggufFinite(x, max float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0
	case math.IsInf(x, 1):
		return max
	case math.IsInf(x, -1):
		return -max
	}
	return x
}

// ggufMeta reads architecture keys with errors that name the file and key.
type ggufMeta struct {
	f     *gguf.File
	arch  string
	views map[string]ggufView // where canonical tensors lie, for unmapped files
}

func (g ggufMeta) key(k string) string { return g.arch + "." + k }

func (g ggufMeta) errorf(format string, args ...any) error {
	return fmt.Errorf("gguf: %s: "+format, append([]any{g.f.Name}, args...)...)
}

// intKey reads a positive integer key, which may also be a per-layer array
// (then layer picks the element; layer -1 requires a scalar or a uniform array).
func (g ggufMeta) intKey(k string, layer int, def int) (int, error) {
	full := g.key(k)
	v, ok := g.f.Metadata[full]
	if !ok {
		if def >= 0 {
			return def, nil
		}
		return 0, g.errorf("missing metadata %s", full)
	}
	if n, ok := g.f.GetInt(full); ok {
		if n < 0 || n > math.MaxInt32 {
			return 0, g.errorf("metadata %s = %d out of range", full, n)
		}
		return int(n), nil
	}
	arr, ok := g.f.GetInts(full)
	if !ok {
		return 0, g.errorf("metadata %s has type %T, want an integer", full, v)
	}
	if layer < 0 {
		for _, x := range arr[min(1, len(arr)):] {
			if x != arr[0] {
				return 0, g.errorf("metadata %s varies per layer where one value is needed", full)
			}
		}
		layer = 0
	}
	if layer >= len(arr) {
		return 0, g.errorf("metadata %s has %d entries, need layer %d", full, len(arr), layer)
	}
	if arr[layer] < 0 || arr[layer] > math.MaxInt32 {
		return 0, g.errorf("metadata %s[%d] = %d out of range", full, layer, arr[layer])
	}
	return int(arr[layer]), nil
}

func (g ggufMeta) floatKey(k string, def float64) (float64, error) {
	full := g.key(k)
	v, ok := g.f.Metadata[full]
	if !ok {
		return def, nil
	}
	x, ok := g.f.GetFloat(full)
	if !ok {
		return 0, g.errorf("metadata %s has type %T, want a number", full, v)
	}
	return x, nil
}

// FromGGUFFile imports an opened GGUF file (for instance one read with
// gguf.Read through HTTP range requests in the browser); Model.Close closes
// it. On a memory-mapped file the weights alias the mapping; otherwise each
// Weights.Tensor call reads that tensor's bytes (nothing is cached, so a
// caller uploading tensors one at a time holds one at a time), and a read
// error makes it return false, with the error available from the Weights'
// Err method (interface{ Err() error }).
func FromGGUFFile(f *gguf.File) (*model.Model, error) {
	return ggufModel(f)
}

// ggufView locates a canonical tensor's bytes inside a file tensor (phi3's
// split tensors are row ranges of fused ones).
type ggufView struct {
	src    string
	off, n int64
}

func ggufModel(f *gguf.File) (*model.Model, error) {
	arch, ok := f.GetString("general.architecture")
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no general.architecture", f.Name)
	}
	style, ok := ggufFamilies[arch]
	if !ok {
		return nil, fmt.Errorf("gguf: %s: unsupported architecture %q (supported: llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe, gemma, gemma2, gemma3, phi3, gpt-oss)", f.Name, arch)
	}
	g := ggufMeta{f: f, arch: arch, views: map[string]ggufView{}}

	// Unmapped files get tensor headers only (Data nil) until a tensor is
	// asked for.
	w := model.MapWeights{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		c, ok := ti.Type.Codec()
		if !ok {
			return nil, fmt.Errorf("gguf: %s: tensor %q: unsupported tensor type %s", f.Name, ti.Name, ti.Type)
		}
		t := &tensor.Tensor{Name: ti.Name, Codec: c, Shape: ti.Shape()}
		if f.Mapped() {
			var err error
			if t.Data, err = f.RawData(ti.Name); err != nil {
				return nil, err
			}
		}
		w[ti.Name] = t
		g.views[ti.Name] = ggufView{src: ti.Name, n: ti.ByteLen()}
	}
	if arch == "phi3" {
		if err := ggufSplitPhi3(g, w); err != nil {
			return nil, err
		}
	}
	if arch == "gpt-oss" {
		ggufRenameGptOss(g, w)
	}
	a, err := ggufArch(g, style, w)
	if err != nil {
		return nil, err
	}
	if err := ggufCheckShapes(g, &a, w); err != nil {
		return nil, err
	}
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", f.Name, err)
	}
	// Llama 3 frequency divisors are now Arch.Rope.Scaling (ggufRope
	// checked they match); keeping the tensor would invite applying them
	// twice.
	delete(w, "rope_freqs.weight")
	tok, err := GGUFTokenizer(f)
	if err != nil {
		return nil, err
	}
	var weights model.Weights = w
	if !f.Mapped() {
		weights = &ggufLazyWeights{f: f, headers: w, views: g.views}
	}
	return &model.Model{
		Arch:      a,
		Weights:   weights,
		Tokenizer: tok,
		Source: model.Provenance{Format: "gguf", Dir: filepath.Dir(f.Name), Files: []model.SourceFile{{
			Name: filepath.Base(f.Name), Size: f.Size,
		}}},
		Close: f.Close,
	}, nil
}

// ggufLazyWeights reads tensors from an unmapped file on demand.
type ggufLazyWeights struct {
	f       *gguf.File
	headers model.MapWeights
	views   map[string]ggufView
	mu      sync.Mutex
	err     error
}

func (w *ggufLazyWeights) Names() []string { return w.headers.Names() }

func (w *ggufLazyWeights) Tensor(name string) (*tensor.Tensor, bool) {
	h, ok := w.headers[name]
	if !ok {
		return nil, false
	}
	v := w.views[name]
	data, err := w.f.RawData(v.src)
	if err == nil && int64(len(data)) < v.off+v.n {
		err = fmt.Errorf("gguf: %s: tensor %q: short read", w.f.Name, v.src)
	}
	if err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
		return nil, false
	}
	return &tensor.Tensor{Name: name, Codec: h.Codec, Shape: slices.Clone(h.Shape), Data: data[v.off : v.off+v.n : v.off+v.n]}, true
}

// Err returns the first error a Tensor call met.
func (w *ggufLazyWeights) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func ggufArch(g ggufMeta, style model.RopeStyle, w model.MapWeights) (model.Arch, error) {
	f := g.f
	a := model.Arch{
		Family: g.arch, Norm: model.NormRMS, Act: model.ActSiLU,
		EmbedScale: 1, ResidualScale: 1, LogitScale: 1, BOS: -1,
	}
	var err error
	if a.Hidden, err = g.intKey("embedding_length", -1, -1); err != nil {
		return a, err
	}
	nLayers, err := g.intKey("block_count", -1, -1)
	if err != nil {
		return a, err
	}
	if nLayers <= 0 || nLayers > 1<<16 {
		return a, g.errorf("block_count %d", nLayers)
	}
	if a.Context, err = g.intKey("context_length", -1, 0); err != nil {
		return a, err
	}
	if _, ok := g.f.Metadata[g.key("attention.layer_norm_rms_epsilon")]; !ok {
		return a, g.errorf("missing metadata %s", g.key("attention.layer_norm_rms_epsilon"))
	}
	eps, err := g.floatKey("attention.layer_norm_rms_epsilon", 0)
	if err != nil {
		return a, err
	}
	a.NormEps = float32(eps) // checked by Arch.Validate

	// Vocabulary: the embedding matrix is the truth for the math (some
	// vocabularies are padded); the metadata serves when it is absent.
	if emb, ok := w[model.TokenEmbd]; ok && len(emb.Shape) == 2 {
		a.Vocab = emb.Shape[0]
	} else if a.Vocab, err = g.intKey("vocab_size", -1, 0); err != nil {
		return a, err
	} else if a.Vocab == 0 {
		if n, ok := f.ArrayLen("tokenizer.ggml.tokens"); ok {
			a.Vocab = n
		}
	}
	_, hasOutput := w[model.Output]
	a.TiedEmbeddings = !hasOutput

	if id, ok := f.GetInt("tokenizer.ggml.bos_token_id"); ok && id >= 0 && id < math.MaxInt32 {
		a.BOS = int(id)
	}
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if id, ok := f.GetInt(k); ok && id >= 0 && id < math.MaxInt32 && !containsInt(a.EOS, int(id)) {
			a.EOS = append(a.EOS, int(id))
		}
	}

	if g.arch == "gpt-oss" {
		// llama.cpp's gpt-oss graph hardcodes the clamped SwiGLU (as
		// transformers' GptOssExperts does).
		a.Act, a.SwiGLULimit, a.SwiGLUAlpha = model.ActSwiGLUOAI, 7.0, 1.702
	}
	gemma := strings.HasPrefix(g.arch, "gemma")
	if gemma {
		a.Act = model.ActGELUTanh
		a.EmbedScale = float32(math.Sqrt(float64(a.Hidden)))
	}
	softcap, err := g.floatKey("final_logit_softcapping", 0)
	if err != nil {
		return a, err
	}
	a.FinalSoftcap = float32(softcap)

	rope, err := ggufRope(g, style, w)
	if err != nil {
		return a, err
	}
	window, err := g.intKey("attention.sliding_window", -1, 0)
	if err != nil {
		return a, err
	}
	attnSoftcap, err := g.floatKey("attn_logit_softcapping", 0)
	if err != nil {
		return a, err
	}
	explicitScale, err := g.floatKey("attention.scale", 0)
	if err != nil {
		return a, err
	}
	experts, err := g.intKey("expert_count", -1, 0)
	if err != nil {
		return a, err
	}

	for i := range nLayers {
		l := model.Layer{Mixer: model.MixerAttention, FFN: model.FFNDense, PreMixerNorm: true, PreFFNNorm: true}
		at := &model.Attention{Rope: rope}
		if at.Heads, err = g.intKey("attention.head_count", i, -1); err != nil {
			return a, err
		}
		if at.Heads <= 0 {
			return a, g.errorf("layer %d: %s is %d", i, g.key("attention.head_count"), at.Heads)
		}
		if at.KVHeads, err = g.intKey("attention.head_count_kv", i, at.Heads); err != nil {
			return a, err
		}
		if at.HeadDim, err = g.intKey("attention.key_length", i, a.Hidden/at.Heads); err != nil {
			return a, err
		}
		if vd, err := g.intKey("attention.value_length", i, at.HeadDim); err != nil {
			return a, err
		} else if vd != at.HeadDim {
			return a, g.errorf("value_length %d differs from key_length %d (not supported)", vd, at.HeadDim)
		}
		if at.Rope.Dims == 0 || at.Rope.Dims > at.HeadDim {
			at.Rope.Dims = at.HeadDim
		}
		at.Scale = float32(1 / math.Sqrt(float64(at.HeadDim)))
		if explicitScale > 0 {
			at.Scale = float32(explicitScale)
		}
		// llama.cpp scales queries by 1/sqrt(hidden/heads) for the 27B
		// Gemma 2 and 3 models (query_pre_attn_scalar, which GGUF does not
		// store), recognized by their layer counts.
		if (g.arch == "gemma2" && nLayers == 46) || (g.arch == "gemma3" && nLayers == 62) {
			at.Scale = float32(1 / math.Sqrt(float64(a.Hidden/at.Heads)))
		}
		at.Softcap = float32(attnSoftcap)
		switch {
		case g.arch == "gemma2" && window > 0:
			if i%2 == 0 {
				at.Window = window
			}
		case g.arch == "gpt-oss" && window > 0:
			// llama.cpp's swa pattern 2: even layers slide.
			if i%2 == 0 {
				at.Window = window
			}
		case g.arch == "gemma3" && window > 0:
			if i%6 != 5 {
				at.Window = window
				// Local layers use their own base and no scaling.
				base, err := g.floatKey("rope.freq_base_swa", 10000)
				if err != nil {
					return a, err
				}
				at.Rope.Theta = base
				at.Rope.Scaling = model.RopeScaling{}
			}
		default:
			at.Window = window
		}
		_, at.Bias = w[model.LayerTensor(i, model.AttnQBias)]
		_, at.OutBias = w[model.LayerTensor(i, model.AttnOutBias)]
		_, at.Sinks = w[model.LayerTensor(i, model.AttnSinks)]
		if qn, ok := w[model.LayerTensor(i, model.AttnQNorm)]; ok {
			at.QKNorm = model.QKNormPerHead
			if qn.Elements() != at.HeadDim {
				at.QKNorm = model.QKNormFull
			}
		}
		l.Attn = at
		_, l.PostMixerNorm = w[model.LayerTensor(i, model.PostAttnNorm)]
		_, l.PostFFNNorm = w[model.LayerTensor(i, model.PostFFNNorm)]

		if experts > 0 {
			moe, err := ggufMoE(g, i, experts, w)
			if err != nil {
				return a, err
			}
			l.FFN, l.MoE = model.FFNMoE, moe
		} else if l.FFNHidden, err = g.intKey("feed_forward_length", i, -1); err != nil {
			return a, err
		}
		a.Layers = append(a.Layers, l)
	}
	return a, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func ggufMoE(g ggufMeta, layer, experts int, w model.MapWeights) (*model.MoE, error) {
	m := &model.MoE{Experts: experts, Scoring: "softmax"}
	var err error
	if m.TopK, err = g.intKey("expert_used_count", -1, -1); err != nil {
		return nil, err
	}
	if m.ExpertHidden, err = g.intKey("expert_feed_forward_length", layer, 0); err != nil {
		return nil, err
	}
	if m.ExpertHidden == 0 {
		if m.ExpertHidden, err = g.intKey("feed_forward_length", layer, -1); err != nil {
			return nil, err
		}
	}
	if m.SharedHidden, err = g.intKey("expert_shared_feed_forward_length", layer, 0); err != nil {
		return nil, err
	}
	if _, ok := w[model.LayerTensor(layer, model.FFNGateShexp)]; ok && m.SharedHidden == 0 {
		if t := w[model.LayerTensor(layer, model.FFNGateShexp)]; len(t.Shape) == 2 {
			m.SharedHidden = t.Shape[0]
		}
	}
	_, m.SharedGate = w[model.LayerTensor(layer, model.FFNShexpGate)]
	// Mixtral (llama) and Qwen3-MoE renormalize the selected weights;
	// Qwen2-MoE does not (llama.cpp hardcodes the same). A file may say so
	// explicitly.
	m.NormTopK = g.arch != "qwen2moe"
	if v, ok := g.f.GetBool(g.key("expert_weights_norm")); ok {
		m.NormTopK = v
	}
	if g.arch == "gpt-oss" {
		// llama.cpp: softmax over the selected logits (SOFTMAX_WEIGHT).
		m.Scoring, m.NormTopK = "topk_softmax", false
	}
	_, m.RouterBias = w[model.LayerTensor(layer, model.FFNRouterB)]
	_, m.ExpertBias = w[model.LayerTensor(layer, model.FFNGateExpsB)]
	if _, ok := w[model.LayerTensor(layer, model.FFNGateExps)]; !ok {
		return nil, g.errorf("layer %d: expert_count %d but no stacked %s (per-expert GGUF tensors are not supported; reconvert with a current llama.cpp)",
			layer, experts, model.LayerTensor(layer, model.FFNGateExps))
	}
	return m, nil
}

// yarnMscale is transformers' get_mscale: YaRN's default attention factor.
func yarnMscale(factor float64) float64 {
	if factor <= 1 {
		return 1
	}
	return 0.1*math.Log(factor) + 1
}

// ggufPostAttnNormGptOss is where llama.cpp's gpt-oss keeps the pre-FFN
// norm (transformers' post_attention_layernorm, a pre-norm of the MoE).
const ggufPostAttnNormGptOss = model.PostAttnNorm

// ggufRenameGptOss gives gpt-oss's pre-FFN norm its canonical name.
func ggufRenameGptOss(g ggufMeta, w model.MapWeights) {
	for name, t := range w {
		if !strings.HasPrefix(name, "blk.") || !strings.HasSuffix(name, "."+ggufPostAttnNormGptOss) {
			continue
		}
		canon := strings.TrimSuffix(name, ggufPostAttnNormGptOss) + model.FFNNorm
		if _, dup := w[canon]; dup {
			continue
		}
		t.Name = canon
		w[canon] = t
		delete(w, name)
		if g.views != nil {
			g.views[canon] = g.views[name]
			delete(g.views, name)
		}
	}
}

// ggufRope reads the rotary embedding shared by all layers.
func ggufRope(g ggufMeta, style model.RopeStyle, w model.MapWeights) (model.Rope, error) {
	r := model.Rope{Style: style}
	var err error
	if r.Theta, err = g.floatKey("rope.freq_base", 10000); err != nil {
		return r, err
	}
	if r.Dims, err = g.intKey("rope.dimension_count", -1, 0); err != nil {
		return r, err
	}
	typ, _ := g.f.GetString(g.key("rope.scaling.type"))
	factor, err := g.floatKey("rope.scaling.factor", 0)
	if err != nil {
		return r, err
	}
	if factor == 0 {
		// Older files spell linear scaling as rope.scale_linear.
		if factor, err = g.floatKey("rope.scale_linear", 0); err != nil {
			return r, err
		}
		if factor != 0 && typ == "" {
			typ = "linear"
		}
	}
	orig, err := g.intKey("rope.scaling.original_context_length", -1, 0)
	if err != nil {
		return r, err
	}
	switch typ {
	case "", "none":
	case "linear":
		if factor != 0 && factor != 1 {
			r.Scaling = model.RopeScaling{Type: "linear", Factor: factor}
		}
	case "yarn":
		r.Scaling = model.RopeScaling{Type: "yarn", Factor: factor, OriginalContext: orig}
		if r.Scaling.BetaFast, err = g.floatKey("rope.scaling.yarn_beta_fast", 32); err != nil {
			return r, err
		}
		if r.Scaling.BetaSlow, err = g.floatKey("rope.scaling.yarn_beta_slow", 1); err != nil {
			return r, err
		}
		if r.Scaling.AttnFactor, err = g.floatKey("rope.scaling.attn_factor", 0); err != nil {
			return r, err
		}
		if g.arch == "gpt-oss" {
			// transformers' gpt-oss config says truncate=false, and
			// llama.cpp's YaRN multiplies its attn_factor (default 1) by
			// 1+0.1·ln(factor), transformers' default attention factor.
			r.Scaling.NoTruncate = true
			if r.Scaling.AttnFactor == 0 {
				r.Scaling.AttnFactor = 1
			}
			r.Scaling.AttnFactor *= yarnMscale(factor)
		}
	default:
		return r, g.errorf("unsupported rope scaling type %q", typ)
	}
	for _, n := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
		if _, ok := w[n]; ok {
			return r, g.errorf("LongRoPE (%s) is not supported", n)
		}
	}
	if ff, ok := w["rope_freqs.weight"]; ok {
		s, err := ggufLlama3Scaling(g, ff, r.Theta, orig)
		if err != nil {
			return r, err
		}
		r.Scaling = s
	}
	return r, nil
}

// ggufLlama3Scaling recovers Llama 3.1's rope scaling, which llama.cpp's
// converter bakes into a rope_freqs tensor of per-frequency divisors instead
// of metadata. The divisors are recomputed from the candidate parameters
// (factor = the largest divisor; low/high frequency factors 1 and 4 over an
// original context of 8192, as every Llama 3.x release uses) and must match.
func ggufLlama3Scaling(g ggufMeta, t *tensor.Tensor, theta float64, orig int) (model.RopeScaling, error) {
	n := t.Elements()
	if t.Codec != tensor.F32 || n == 0 {
		return model.RopeScaling{}, g.errorf("rope_freqs.weight: %s with %d elements, want f32", t.Codec, n)
	}
	data := t.Data
	if data == nil { // unmapped file: read it
		var err error
		if data, err = g.f.RawData(t.Name); err != nil {
			return model.RopeScaling{}, err
		}
	}
	div := make([]float32, n)
	if err := tensor.Dequantize(div, t.Codec, data); err != nil {
		return model.RopeScaling{}, g.errorf("rope_freqs.weight: %v", err)
	}
	factor := float64(0)
	for _, d := range div {
		factor = max(factor, float64(d))
	}
	if orig == 0 {
		orig = 8192
	}
	s := model.RopeScaling{Type: "llama3", Factor: factor, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: orig}
	lowWave := float64(orig) / s.LowFreqFactor
	highWave := float64(orig) / s.HighFreqFactor
	dims := 2 * n
	for i, d := range div {
		freq := math.Pow(theta, -float64(2*i)/float64(dims))
		wave := 2 * math.Pi / freq
		want := 1.0
		switch {
		case wave < highWave:
		case wave > lowWave:
			want = factor
		default:
			smooth := (float64(orig)/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			want = 1 / ((1-smooth)/factor + smooth)
		}
		if math.Abs(float64(d)-want) > 1e-3*want {
			return model.RopeScaling{}, g.errorf("rope_freqs.weight[%d] = %g does not match Llama 3 scaling (factor %g, expected %g): unsupported frequency factors", i, d, factor, want)
		}
	}
	if factor == 1 {
		return model.RopeScaling{}, nil
	}
	return s, nil
}

// ggufSplitPhi3 replaces Phi-3's fused attn_qkv and gate+up ffn_up by the
// canonical tensors, as row ranges (views) of the fused ones.
func ggufSplitPhi3(g ggufMeta, w model.MapWeights) error {
	nLayers, err := g.intKey("block_count", -1, -1)
	if err != nil {
		return err
	}
	hidden, err := g.intKey("embedding_length", -1, -1)
	if err != nil {
		return err
	}
	for i := range nLayers {
		heads, err := g.intKey("attention.head_count", i, -1)
		if err != nil || heads <= 0 {
			return g.errorf("layer %d: bad attention.head_count", i)
		}
		kv, err := g.intKey("attention.head_count_kv", i, heads)
		if err != nil {
			return err
		}
		hd, err := g.intKey("attention.key_length", i, hidden/heads)
		if err != nil {
			return err
		}
		if qkv, ok := w[model.LayerTensor(i, "attn_qkv.weight")]; ok {
			names := []string{model.AttnQ, model.AttnK, model.AttnV}
			if err := ggufSplitRows(g, w, qkv, i, names, []int{heads * hd, kv * hd, kv * hd}); err != nil {
				return err
			}
		}
		if _, hasGate := w[model.LayerTensor(i, model.FFNGate)]; !hasGate {
			up, ok := w[model.LayerTensor(i, model.FFNUp)]
			if ok && len(up.Shape) == 2 && up.Shape[0]%2 == 0 {
				ff := up.Shape[0] / 2
				if err := ggufSplitRows(g, w, up, i, []string{model.FFNGate, model.FFNUp}, []int{ff, ff}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func ggufSplitRows(g ggufMeta, w model.MapWeights, t *tensor.Tensor, layer int, names []string, rows []int) error {
	total := 0
	for _, r := range rows {
		total += r
	}
	if len(t.Shape) != 2 || t.Shape[0] != total {
		return g.errorf("%s: shape %v, want [%d, *] to split into %v", t.Name, t.Shape, total, names)
	}
	rb, err := t.Codec.RowBytes(t.Shape[1])
	if err != nil {
		return g.errorf("%s: %v", t.Name, err)
	}
	delete(w, t.Name)
	src, hasView := g.views[t.Name]
	off := 0
	for k, r := range rows {
		name := model.LayerTensor(layer, names[k])
		end := off + r*rb
		part := &tensor.Tensor{Name: name, Codec: t.Codec, Shape: []int{r, t.Shape[1]}}
		if t.Data != nil {
			part.Data = t.Data[off:end:end]
		}
		if hasView {
			g.views[name] = ggufView{src: src.src, off: src.off + int64(off), n: int64(end - off)}
		}
		w[name] = part
		off = end
	}
	return nil
}

// ggufCheckShapes verifies the tensors every layer needs, so that a
// malformed file fails here with a clear message rather than in a kernel.
func ggufCheckShapes(g ggufMeta, a *model.Arch, w model.MapWeights) error {
	check := func(name string, shape ...int) error {
		t, ok := w[name]
		if !ok {
			return g.errorf("missing tensor %s", name)
		}
		if len(t.Shape) != len(shape) {
			return g.errorf("tensor %s has shape %v, want %v", name, t.Shape, shape)
		}
		for i := range shape {
			if t.Shape[i] != shape[i] {
				return g.errorf("tensor %s has shape %v, want %v", name, t.Shape, shape)
			}
		}
		return nil
	}
	H := a.Hidden
	if err := check(model.TokenEmbd, a.Vocab, H); err != nil {
		return err
	}
	if err := check(model.OutputNorm, H); err != nil {
		return err
	}
	if !a.TiedEmbeddings {
		if err := check(model.Output, a.Vocab, H); err != nil {
			return err
		}
	}
	for i, l := range a.Layers {
		at := l.Attn
		q, kv := at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
		for _, c := range []struct {
			suffix string
			shape  []int
		}{
			{model.AttnNorm, []int{H}},
			{model.AttnQ, []int{q, H}},
			{model.AttnK, []int{kv, H}},
			{model.AttnV, []int{kv, H}},
			{model.AttnOut, []int{H, q}},
			{model.FFNNorm, []int{H}},
		} {
			if err := check(model.LayerTensor(i, c.suffix), c.shape...); err != nil {
				return err
			}
		}
		if l.FFN == model.FFNDense {
			ff := l.FFNHidden
			for _, c := range []struct {
				suffix string
				shape  []int
			}{
				{model.FFNGate, []int{ff, H}},
				{model.FFNUp, []int{ff, H}},
				{model.FFNDown, []int{H, ff}},
			} {
				if err := check(model.LayerTensor(i, c.suffix), c.shape...); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

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

// ggufFamilyFor maps an Arch family (a Hugging Face model_type or a GGUF
// architecture) to the GGUF architecture llama.cpp knows it by.
func ggufFamilyFor(family string) (string, bool) {
	switch family {
	case "llama", "mistral":
		return "llama", true
	case "gemma3_text":
		return "gemma3", true
	case "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3":
		return family, true
	case "gpt_oss", "gpt-oss":
		return "gpt-oss", true
	}
	return "", false
}

// SaveGGUF writes m as a GGUF v3 file for llama.cpp, the inverse of
// FromGGUF: architecture metadata under the llama.cpp keys, the tokenizer
// (from a "gguf" TokenizerData; without one, tokenizer.ggml.model is
// "no_vocab"), and the weights in their codecs, converted where GGUF's
// conventions differ from the engine's:
//   - llama/mistral with rotate-half (NEOX) RoPE get their q/k rows permuted
//     to the interleaved layout llama.cpp's "llama" expects;
//   - Gemma norms with the (1+w) convention get 1 added (as f32);
//   - Phi-3 q/k/v and gate/up are fused into attn_qkv and ffn_up;
//   - Llama 3 RoPE scaling becomes a rope_freqs tensor;
//   - gpt-oss's pre-FFN norm is named post_attention_norm, as llama.cpp
//     names it, and its YaRN attention factor is stored relative to
//     llama.cpp's built-in 1+0.1·ln(factor).
//
// It refuses a model GGUF cannot express exactly: it re-derives the Arch
// from what it would write (as FromGGUF does) and fails, naming the
// difference, unless that matches m.Arch.
func SaveGGUF(m *model.Model, path string) error {
	arch, ok := ggufFamilyFor(m.Arch.Family)
	if !ok {
		return fmt.Errorf("gguf: %s: family %q has no GGUF mapping (supported: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, phi3, gpt_oss)", path, m.Arch.Family)
	}
	a := &m.Arch
	if err := a.Validate(); err != nil {
		return fmt.Errorf("gguf: %s: %w", path, err)
	}
	l0 := a.Layers[0]
	var moe *model.MoE
	for i, l := range a.Layers {
		if l.Mixer != model.MixerAttention || (l.FFN != model.FFNDense && (l.FFN != model.FFNMoE || arch != "gpt-oss")) {
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
	if arch == "gemma3" {
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
		if af := rope.Scaling.AttnFactor; arch == "gpt-oss" {
			if rel := af / yarnMscale(rope.Scaling.Factor); af != 0 && rel != 1 {
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
		t, _ := m.Weights.Tensor(n)
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
	if arch == "llama" {
		for i, l := range expect.Layers {
			if l.Attn.Rope.Style == model.RopeInterleaved {
				continue
			}
			if l.Attn.Rope.Dims != l.Attn.HeadDim {
				return fmt.Errorf("gguf: %s: layer %d: partial NEOX RoPE cannot be expressed as GGUF llama", path, i)
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
	if strings.HasPrefix(arch, "gemma") && a.Norm == model.NormRMSPlusOne {
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
	if arch == "phi3" {
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
	if arch == "gpt-oss" {
		for i := range expect.Layers {
			n := model.LayerTensor(i, model.FFNNorm)
			if t, ok := w[n]; ok {
				delete(w, n)
				r := *t
				r.Name = model.LayerTensor(i, ggufPostAttnNormGptOss)
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
	if arch == "phi3" {
		if err := ggufSplitPhi3(ggufMeta{f: mf, arch: arch}, check); err != nil {
			return err
		}
	}
	if arch == "gpt-oss" {
		for n, t := range check {
			c := *t
			check[n] = &c // the rename below must not touch w's tensors
		}
		ggufRenameGptOss(ggufMeta{f: mf, arch: arch}, check)
	}
	got, err := ggufArch(ggufMeta{f: mf, arch: arch}, ggufFamilies[arch], check)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, expect) {
		gj, _ := json.Marshal(got)
		ej, _ := json.Marshal(expect)
		return fmt.Errorf("gguf: %s: the model cannot be expressed in GGUF %s exactly:\n  would read back as %s\n  model is           %s", path, arch, gj, ej)
	}

	gw, err := gguf.Create(path)
	if err != nil {
		return err
	}
	for _, kv := range meta {
		if err := gw.AddMetadata(kv.k, kv.v); err != nil {
			gw.Close()
			return err
		}
	}
	names := cmfTensorOrder(slices.Collect(maps.Keys(w)))
	for _, n := range names {
		if err := gw.AddTensor(n, w[n].Codec, w[n].Shape); err != nil {
			gw.Close()
			return err
		}
	}
	for _, n := range names {
		if err := gw.WriteTensor(w[n]); err != nil {
			gw.Close()
			return err
		}
	}
	return gw.Close()
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

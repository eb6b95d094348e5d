package importer

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/internal/ggufarch"
	"github.com/cortiq/cortiq/mapfile"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/model/family"
	"github.com/cortiq/cortiq/tensor"
)

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
// writer.SaveCMF adds it (from Source.Dir) when the model is written as CMF.
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
	sum, n, err := mapfile.SHA256(path)
	if err != nil {
		return model.Provenance{}, fmt.Errorf("gguf: %w", err)
	}
	return model.Provenance{Format: "gguf", Files: []model.SourceFile{{Name: filepath.Base(path), Size: n, SHA256: sum}}}, nil
}

// GGUFTokenizer collects the tokenizer material of a GGUF file: every
// "tokenizer." metadata key, serialized as one JSON object (arrays as JSON
// arrays) under the file name gguf_vocab.json. It is nil when the file has no
// tokenizer keys or says tokenizer.ggml.model "no_vocab" without tokens; it
// holds the Hugging Face files (Kind "hf") of a file SaveGGUF wrote from a
// Hugging Face checkpoint. Strings that are not valid UTF-8 cannot be
// represented in JSON and come out with U+FFFD replacements; no known
// vocabulary has them.
func GGUFTokenizer(f *gguf.File) (*model.TokenizerData, error) {
	if hf := ggufHFTokenizer(f); hf != nil {
		return hf, nil
	}
	if m, _ := f.GetString("tokenizer.ggml.model"); m == "no_vocab" {
		if _, vocab := f.Metadata["tokenizer.ggml.tokens"]; !vocab {
			return nil, nil // llama.cpp's "no vocabulary": token ids only
		}
	}
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

// A GGUF file SaveGGUF wrote from a Hugging Face checkpoint carries its
// tokenizer files (ggufarch.HFTokenizerKey, ggufarch.HFFilePrefix).

// ggufHFTokenizer returns the Hugging Face tokenizer files a file carries
// when it has no llama.cpp vocabulary (tokenizer.ggml.tokens), else nil.
func ggufHFTokenizer(f *gguf.File) *model.TokenizerData {
	tj, ok := f.GetString(ggufarch.HFTokenizerKey)
	if !ok {
		return nil
	}
	if _, vocab := f.Metadata["tokenizer.ggml.tokens"]; vocab {
		return nil
	}
	td := &model.TokenizerData{Kind: "hf", Files: map[string][]byte{"tokenizer.json": []byte(tj)}}
	for _, k := range f.Keys {
		if name, ok := strings.CutPrefix(k, ggufarch.HFFilePrefix); ok && slices.Contains(hfTokenizerFiles, name) && name != "tokenizer.json" {
			if v, ok := f.GetString(k); ok {
				td.Files[name] = []byte(v)
			}
		}
	}
	return td
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

func ggufModel(f *gguf.File) (*model.Model, error) {
	arch, ok := f.GetString("general.architecture")
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no general.architecture", f.Name)
	}
	fam, ok := family.GGUF(arch)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: unsupported architecture %q (supported: %s)", f.Name, arch, strings.Join(family.GGUFNames(), ", "))
	}
	views := map[string]ggufarch.View{}

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
		views[ti.Name] = ggufarch.View{Src: ti.Name, N: ti.ByteLen()}
	}
	if err := ggufarch.Canonicalize(f, fam, w, views); err != nil {
		return nil, err
	}
	a, err := ggufarch.Arch(f, fam, w)
	if err != nil {
		return nil, err
	}
	if err := ggufarch.CheckShapes(f, fam, &a, w); err != nil {
		return nil, err
	}
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", f.Name, err)
	}
	// Llama 3 frequency divisors are now Arch.Rope.Scaling (ggufarch
	// checked they match); keeping the tensor would invite applying them
	// twice.
	delete(w, "rope_freqs.weight")
	tok, err := GGUFTokenizer(f)
	if err != nil {
		return nil, err
	}
	var weights model.Weights = w
	if !f.Mapped() {
		lv := make(map[string]lazyView, len(views))
		for name, v := range views {
			lv[name] = lazyView{src: v.Src, off: v.Off, n: v.N}
		}
		weights = &lazyWeights{label: "gguf: " + f.Name, src: f, headers: w, views: lv}
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

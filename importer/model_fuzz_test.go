package importer

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tokenizer"
)

// FuzzFromGGUF imports arbitrary GGUF bytes the way run does (container,
// metadata to Arch, weights, tokenizer) and runs one token through the CPU
// backend: nothing may panic, and a model that imports must either be
// refused by the CPU backend or give finite logits or a NonFiniteError.
func FuzzFromGGUF(f *testing.F) {
	for _, arch := range []string{"llama", "qwen2"} {
		raw, err := os.ReadFile(ggufMicro(arch).write(f))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := gguf.Read(bytes.NewReader(data), int64(len(data)), "fuzz.gguf")
		if err != nil {
			return
		}
		m, err := FromGGUFFile(gf)
		if err != nil {
			return
		}
		defer m.Close()
		if m.Tokenizer != nil {
			if tk, err := tokenizer.Load(m.Tokenizer); err == nil {
				tk.Encode("hi there", true)
			}
		}
		b, err := cpu.New(m, cpu.Options{})
		if err != nil {
			return
		}
		s, err := b.NewSession(4)
		if err != nil {
			return
		}
		defer s.Close()
		logits, err := s.Forward([]int{0, m.Arch.Vocab - 1}, false)
		var nf *cpu.NonFiniteError
		if err != nil && !errors.As(err, &nf) {
			t.Fatalf("forward: %v", err)
		}
		if err == nil && len(logits) != m.Arch.Vocab {
			t.Fatalf("%d logits for a vocabulary of %d", len(logits), m.Arch.Vocab)
		}
	})
}

// ggufMicro is a one-layer model of a few hundred floats: small seeds keep
// the fuzzer's mutations fast.
func ggufMicro(arch string) *ggufTiny {
	const H, heads, kv, hd, ff, V = 8, 2, 1, 4, 16, 8
	g := &ggufTiny{
		arch: arch,
		meta: map[string]any{
			arch + ".embedding_length":                 uint32(H),
			arch + ".block_count":                      uint32(1),
			arch + ".attention.head_count":             uint32(heads),
			arch + ".attention.head_count_kv":          uint32(kv),
			arch + ".feed_forward_length":              uint32(ff),
			arch + ".context_length":                   uint32(16),
			arch + ".attention.layer_norm_rms_epsilon": float32(1e-6),
			arch + ".rope.freq_base":                   float32(10000),
			"tokenizer.ggml.model":                     "llama",
			"tokenizer.ggml.tokens":                    []string{"<unk>", "<s>", "</s>", "▁", "h", "i", "▁hi", "t"},
			"tokenizer.ggml.scores":                    []float32{0, 0, 0, -1, -2, -2, -1, -3},
		},
		tensors: map[string][]int{
			model.TokenEmbd:  {V, H},
			model.OutputNorm: {H},
			model.Output:     {V, H},
		},
		types: map[string]gguf.GGMLType{},
		data:  map[string][]float32{},
	}
	for s, shape := range map[string][]int{
		model.AttnNorm: {H}, model.FFNNorm: {H},
		model.AttnQ: {heads * hd, H}, model.AttnK: {kv * hd, H}, model.AttnV: {kv * hd, H}, model.AttnOut: {H, heads * hd},
		model.FFNGate: {ff, H}, model.FFNUp: {ff, H}, model.FFNDown: {H, ff},
	} {
		g.tensors[model.LayerTensor(0, s)] = shape
	}
	if arch == "qwen2" {
		g.tensors[model.LayerTensor(0, model.AttnQBias)] = []int{heads * hd}
		g.tensors[model.LayerTensor(0, model.AttnKBias)] = []int{kv * hd}
		g.tensors[model.LayerTensor(0, model.AttnVBias)] = []int{kv * hd}
	}
	return g
}

// The seeds import and run: the fuzzer starts from models that go deep.
func TestFuzzSeedsRun(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2"} {
		m, err := FromGGUF(ggufMicro(arch).write(t))
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		b, err := cpu.New(m, cpu.Options{})
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		s, _ := b.NewSession(4)
		if _, err := s.Forward([]int{1, 6}, false); err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		tk, err := tokenizer.Load(m.Tokenizer)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		tk.Encode("hi", true)
		m.Close()
	}
}

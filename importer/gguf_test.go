package importer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

func ggufSharedDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "shared")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared fixtures not found at %s: %v", dir, err)
	}
	return dir
}

func ggufStoriesPath(t testing.TB) string {
	return filepath.Join(ggufSharedDir(t), "fixtures", "models", "stories260K.gguf")
}

func TestFromGGUFStories260K(t *testing.T) {
	path := ggufStoriesPath(t)
	m, err := FromGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := m.Arch
	if a.Family != "llama" || a.Hidden != 64 || len(a.Layers) != 5 || a.Vocab != 512 || a.Context != 2048 {
		t.Fatalf("arch %+v", a)
	}
	if a.NormEps != 1e-5 || a.Norm != model.NormRMS || a.Act != model.ActSiLU || a.EmbedScale != 1 ||
		a.ResidualScale != 1 || a.LogitScale != 1 || a.TiedEmbeddings || a.BOS != 1 || !reflect.DeepEqual(a.EOS, []int{2}) {
		t.Errorf("arch scalars %+v", a)
	}
	for i, l := range a.Layers {
		at := l.Attn
		want := model.Attention{Heads: 8, KVHeads: 4, HeadDim: 8, Scale: float32(1 / math.Sqrt(8)),
			Rope: model.Rope{Theta: 10000, Dims: 8, Style: model.RopeInterleaved}}
		if l.Mixer != model.MixerAttention || at == nil || !reflect.DeepEqual(*at, want) {
			t.Errorf("layer %d attention %+v", i, at)
		}
		if l.FFN != model.FFNDense || l.FFNHidden != 172 || !l.PreMixerNorm || !l.PreFFNNorm || l.PostMixerNorm || l.PostFFNNorm {
			t.Errorf("layer %d %+v", i, l)
		}
	}
	if n := len(m.Weights.Names()); n != 48 {
		t.Errorf("%d weights", n)
	}
	q, ok := m.Weights.Tensor("blk.4.attn_k.weight")
	if !ok || !reflect.DeepEqual(q.Shape, []int{32, 64}) || q.Codec != tensor.F32 {
		t.Errorf("attn_k %+v", q)
	}
	if m.Tokenizer == nil || m.Tokenizer.Kind != "gguf" {
		t.Fatalf("tokenizer %+v", m.Tokenizer)
	}
	var vocab map[string]any
	if err := json.Unmarshal(m.Tokenizer.Files["gguf_vocab.json"], &vocab); err != nil {
		t.Fatal(err)
	}
	toks, _ := vocab["tokenizer.ggml.tokens"].([]any)
	if len(toks) != 512 || toks[1] != "<s>" || vocab["tokenizer.ggml.model"] != "llama" || vocab["tokenizer.ggml.bos_token_id"] != 1.0 {
		t.Errorf("vocab json: %d tokens, model %v", len(toks), vocab["tokenizer.ggml.model"])
	}
	for k := range vocab {
		if !strings.HasPrefix(k, "tokenizer.") {
			t.Errorf("vocab json has %q", k)
		}
	}
	st, _ := os.Stat(path)
	if m.Source.Format != "gguf" || len(m.Source.Files) != 1 || m.Source.Files[0].Name != "stories260K.gguf" || m.Source.Files[0].Size != st.Size() {
		t.Errorf("source %+v", m.Source)
	}

	prov, err := GGUFProvenance(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	sum := sha256.Sum256(raw)
	if prov.Files[0].SHA256 != hex.EncodeToString(sum[:]) || prov.Files[0].Size != int64(len(raw)) {
		t.Errorf("provenance %+v", prov)
	}
}

// ggufTiny describes a synthetic model file.
type ggufTiny struct {
	arch    string
	meta    map[string]any
	tensors map[string][]int // PyTorch-order shapes
	types   map[string]gguf.GGMLType
	data    map[string][]float32
}

func ggufTinyLlama(arch string) *ggufTiny {
	const H, heads, kv, hd, ff, V = 32, 4, 2, 8, 64, 48
	g := &ggufTiny{
		arch: arch,
		meta: map[string]any{
			arch + ".embedding_length":                 uint32(H),
			arch + ".block_count":                      uint32(2),
			arch + ".attention.head_count":             uint32(heads),
			arch + ".attention.head_count_kv":          uint32(kv),
			arch + ".feed_forward_length":              uint32(ff),
			arch + ".context_length":                   uint32(256),
			arch + ".attention.layer_norm_rms_epsilon": float32(1e-6),
			arch + ".rope.freq_base":                   float32(500000),
			"tokenizer.ggml.model":                     "gpt2",
			"tokenizer.ggml.tokens":                    make([]string, V),
			"tokenizer.ggml.bos_token_id":              uint32(5),
			"tokenizer.ggml.eos_token_id":              uint32(6),
			"tokenizer.ggml.eot_token_id":              uint32(7),
			"tokenizer.ggml.scores":                    []float32{float32(math.Inf(-1)), 1},
		},
		tensors: map[string][]int{
			model.TokenEmbd:  {V, H},
			model.OutputNorm: {H},
			model.Output:     {V, H},
		},
		types: map[string]gguf.GGMLType{},
		data:  map[string][]float32{},
	}
	for i := range 2 {
		for s, shape := range map[string][]int{
			model.AttnNorm: {H}, model.FFNNorm: {H},
			model.AttnQ: {heads * hd, H}, model.AttnK: {kv * hd, H}, model.AttnV: {kv * hd, H}, model.AttnOut: {H, heads * hd},
			model.FFNGate: {ff, H}, model.FFNUp: {ff, H}, model.FFNDown: {H, ff},
		} {
			g.tensors[model.LayerTensor(i, s)] = shape
		}
	}
	return g
}

func (g *ggufTiny) write(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), g.arch+".gguf")
	w, err := gguf.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddMetadata("general.architecture", g.arch); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(g.meta))
	for k := range g.meta {
		keys = append(keys, k)
	}
	slicesSortStrings(keys)
	for _, k := range keys {
		if err := w.AddMetadata(k, g.meta[k]); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, 0, len(g.tensors))
	for n := range g.tensors {
		names = append(names, n)
	}
	slicesSortStrings(names)
	for _, n := range names {
		shape := g.tensors[n]
		typ, ok := g.types[n]
		if !ok {
			typ = gguf.TypeF32
		}
		dims := make([]uint64, len(shape))
		for i, d := range shape {
			dims[len(shape)-1-i] = uint64(d)
		}
		if err := w.AddTensorInfo(n, typ, dims); err != nil {
			t.Fatal(err)
		}
	}
	for k, n := range names {
		ti := gguf.TensorInfo{Name: n, Type: gguf.TypeF32, Dims: []uint64{1}}
		if typ, ok := g.types[n]; ok {
			ti.Type = typ
		}
		elems := 1
		for _, d := range g.tensors[n] {
			elems *= d
		}
		var data []byte
		if ti.Type == gguf.TypeF32 {
			data = make([]byte, 4*elems)
			vals := g.data[n]
			for i := range elems {
				v := float32(math.Sin(float64(i*7+k))) * 0.1
				if vals != nil {
					v = vals[i]
				}
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		} else {
			data = make([]byte, int64(elems)/ti.Type.BlockLen()*ti.Type.BlockBytes())
		}
		if err := w.WriteTensorData(n, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func slicesSortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestFromGGUFLlamaSynthetic(t *testing.T) {
	g := ggufTinyLlama("llama")
	delete(g.tensors, model.Output)
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := m.Arch
	if !a.TiedEmbeddings || a.BOS != 5 || !reflect.DeepEqual(a.EOS, []int{6, 7}) || a.Vocab != 48 || a.NormEps != 1e-6 {
		t.Errorf("arch %+v", a)
	}
	at := a.Layers[1].Attn
	if at.Rope.Theta != 500000 || at.Rope.Dims != 8 || at.Rope.Style != model.RopeInterleaved || at.HeadDim != 8 || at.Window != 0 {
		t.Errorf("attention %+v", at)
	}
	var vocab map[string]any
	if err := json.Unmarshal(m.Tokenizer.Files["gguf_vocab.json"], &vocab); err != nil {
		t.Fatal(err)
	}
	if sc := vocab["tokenizer.ggml.scores"].([]any); float32(sc[0].(float64)) != -math.MaxFloat32 {
		t.Errorf("-inf score became %v", sc[0])
	}
}

func TestFromGGUFLlama3RopeFreqs(t *testing.T) {
	g := ggufTinyLlama("llama")
	// Llama 3.1's divisors for head_dim 8, theta 500000, factor 8 at
	// original context 8192: recomputed as the converter does.
	theta, factor, orig := 500000.0, 8.0, 8192.0
	div := make([]float32, 4)
	for i := range div {
		freq := math.Pow(theta, -float64(2*i)/8)
		wave := 2 * math.Pi / freq
		switch {
		case wave < orig/4:
			div[i] = 1
		case wave > orig/1:
			div[i] = float32(factor)
		default:
			smooth := (orig/wave - 1) / (4 - 1)
			div[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	g.tensors["rope_freqs.weight"] = []int{4}
	g.data["rope_freqs.weight"] = div
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.Arch.Layers[0].Attn.Rope.Scaling
	if s.Type != "llama3" || s.Factor != 8 || s.LowFreqFactor != 1 || s.HighFreqFactor != 4 || s.OriginalContext != 8192 {
		t.Errorf("scaling %+v", s)
	}
	div[1] *= 1.5
	g.data["rope_freqs.weight"] = div
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), "rope_freqs") {
		t.Errorf("bad divisors: %v", err)
	}
}

func TestFromGGUFQwen(t *testing.T) {
	g := ggufTinyLlama("qwen2")
	for i := range 2 {
		g.tensors[model.LayerTensor(i, model.AttnQBias)] = []int{32}
		g.tensors[model.LayerTensor(i, model.AttnKBias)] = []int{16}
		g.tensors[model.LayerTensor(i, model.AttnVBias)] = []int{16}
	}
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	at := m.Arch.Layers[0].Attn
	if !at.Bias || at.OutBias || at.Rope.Style != model.RopeNeoX || at.QKNorm != model.QKNormNone {
		t.Errorf("qwen2 attention %+v", at)
	}
	m.Close()

	g = ggufTinyLlama("qwen3")
	g.meta["qwen3.attention.key_length"] = uint32(16)
	g.meta["qwen3.attention.value_length"] = uint32(16)
	for i := range 2 {
		g.tensors[model.LayerTensor(i, model.AttnQ)] = []int{4 * 16, 32}
		g.tensors[model.LayerTensor(i, model.AttnK)] = []int{2 * 16, 32}
		g.tensors[model.LayerTensor(i, model.AttnV)] = []int{2 * 16, 32}
		g.tensors[model.LayerTensor(i, model.AttnOut)] = []int{32, 4 * 16}
		g.tensors[model.LayerTensor(i, model.AttnQNorm)] = []int{16}
		g.tensors[model.LayerTensor(i, model.AttnKNorm)] = []int{16}
	}
	m, err = FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	at = m.Arch.Layers[1].Attn
	if at.HeadDim != 16 || at.Rope.Dims != 16 || at.QKNorm != model.QKNormPerHead || at.Scale != 0.25 {
		t.Errorf("qwen3 attention %+v", at)
	}
	m.Close()
}

func TestFromGGUFGemma2(t *testing.T) {
	g := ggufTinyLlama("gemma2")
	delete(g.tensors, model.Output)
	g.meta["gemma2.attention.key_length"] = uint32(8)
	g.meta["gemma2.attention.sliding_window"] = uint32(16)
	g.meta["gemma2.attn_logit_softcapping"] = float32(50)
	g.meta["gemma2.final_logit_softcapping"] = float32(30)
	for i := range 2 {
		g.tensors[model.LayerTensor(i, model.PostAttnNorm)] = []int{32}
		g.tensors[model.LayerTensor(i, model.PostFFNNorm)] = []int{32}
	}
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := m.Arch
	if a.Norm != model.NormRMS || a.Act != model.ActGELUTanh || a.EmbedScale != float32(math.Sqrt(32)) || a.FinalSoftcap != 30 || !a.TiedEmbeddings {
		t.Errorf("gemma2 arch %+v", a)
	}
	l0, l1 := a.Layers[0], a.Layers[1]
	if l0.Attn.Window != 16 || l1.Attn.Window != 0 || l0.Attn.Softcap != 50 || !l0.PostMixerNorm || !l0.PostFFNNorm || l0.Attn.Rope.Style != model.RopeNeoX {
		t.Errorf("gemma2 layers %+v %+v / %+v", l0, l0.Attn, l1.Attn)
	}
}

func TestFromGGUFGemma3(t *testing.T) {
	g := ggufTinyLlama("gemma3")
	g.meta["gemma3.block_count"] = uint32(7)
	g.meta["gemma3.attention.sliding_window"] = uint32(16)
	g.meta["gemma3.rope.freq_base"] = float32(1e6)
	g.meta["gemma3.rope.scaling.type"] = "linear"
	g.meta["gemma3.rope.scaling.factor"] = float32(8)
	base := ggufTinyLlama("gemma3")
	for i := range 7 {
		for s, shape := range map[string][]int{
			model.AttnNorm: {32}, model.FFNNorm: {32}, model.PostAttnNorm: {32}, model.PostFFNNorm: {32},
			model.AttnQNorm: {8}, model.AttnKNorm: {8},
		} {
			g.tensors[model.LayerTensor(i, s)] = shape
		}
		for _, s := range []string{model.AttnQ, model.AttnK, model.AttnV, model.AttnOut, model.FFNGate, model.FFNUp, model.FFNDown} {
			g.tensors[model.LayerTensor(i, s)] = base.tensors[model.LayerTensor(0, s)]
		}
	}
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i, l := range m.Arch.Layers {
		at := l.Attn
		if i == 5 {
			if at.Window != 0 || at.Rope.Theta != 1e6 || at.Rope.Scaling.Type != "linear" || at.Rope.Scaling.Factor != 8 {
				t.Errorf("global layer %d: %+v", i, at)
			}
		} else if at.Window != 16 || at.Rope.Theta != 10000 || at.Rope.Scaling.Type != "" {
			t.Errorf("local layer %d: %+v", i, at)
		}
		if at.QKNorm != model.QKNormPerHead {
			t.Errorf("layer %d qk norm %q", i, at.QKNorm)
		}
	}
}

func TestFromGGUFPhi3Split(t *testing.T) {
	g := ggufTinyLlama("phi3")
	for i := range 2 {
		delete(g.tensors, model.LayerTensor(i, model.AttnQ))
		delete(g.tensors, model.LayerTensor(i, model.AttnK))
		delete(g.tensors, model.LayerTensor(i, model.AttnV))
		delete(g.tensors, model.LayerTensor(i, model.FFNGate))
		g.tensors[model.LayerTensor(i, "attn_qkv.weight")] = []int{32 + 16 + 16, 32}
		g.tensors[model.LayerTensor(i, model.FFNUp)] = []int{128, 32}
	}
	path := g.write(t)
	m, err := FromGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f, _ := gguf.Open(path)
	defer f.Close()
	qkv, _ := f.Tensor("blk.1.attn_qkv.weight")
	k, _ := m.Weights.Tensor("blk.1.attn_k.weight")
	if !reflect.DeepEqual(k.Shape, []int{16, 32}) || string(k.Data) != string(qkv.Data[32*32*4:48*32*4]) {
		t.Errorf("attn_k split wrong: %v", k.Shape)
	}
	up, _ := f.Tensor("blk.0.ffn_up.weight")
	gate, _ := m.Weights.Tensor("blk.0.ffn_gate.weight")
	up2, _ := m.Weights.Tensor("blk.0.ffn_up.weight")
	if string(gate.Data) != string(up.Data[:64*32*4]) || string(up2.Data) != string(up.Data[64*32*4:]) {
		t.Error("gate/up split wrong")
	}
	if _, ok := m.Weights.Tensor("blk.0.attn_qkv.weight"); ok {
		t.Error("fused tensor kept")
	}
}

func TestFromGGUFErrors(t *testing.T) {
	g := ggufTinyLlama("llama")
	g.types[model.LayerTensor(1, model.FFNDown)] = gguf.TypeQ8_K
	g.tensors[model.LayerTensor(1, model.FFNDown)] = []int{32, 256}
	_, err := FromGGUF(g.write(t))
	if err == nil || !strings.Contains(err.Error(), "blk.1.ffn_down.weight") || !strings.Contains(err.Error(), "Q8_K") {
		t.Errorf("Q8_K: %v", err)
	}

	g = ggufTinyLlama("llama")
	g.types[model.LayerTensor(0, model.FFNUp)] = gguf.TypeQ8_0
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatalf("q8_0 tensor: %v", err)
	}
	if up, _ := m.Weights.Tensor(model.LayerTensor(0, model.FFNUp)); up.Codec != tensor.Q8_0 {
		t.Errorf("codec %v", up.Codec)
	}
	m.Close()

	g = ggufTinyLlama("gpt2")
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), `unsupported architecture "gpt2"`) {
		t.Errorf("gpt2: %v", err)
	}
	g = ggufTinyLlama("llama")
	delete(g.meta, "llama.block_count")
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), "llama.block_count") {
		t.Errorf("missing key: %v", err)
	}
	g = ggufTinyLlama("llama")
	g.tensors[model.LayerTensor(1, model.AttnK)] = []int{8, 32}
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), "blk.1.attn_k.weight") {
		t.Errorf("bad shape: %v", err)
	}
	g = ggufTinyLlama("llama")
	delete(g.tensors, model.LayerTensor(0, model.FFNGate))
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), "missing tensor blk.0.ffn_gate.weight") {
		t.Errorf("missing tensor: %v", err)
	}
	if _, err := FromGGUF(filepath.Join(t.TempDir(), "nope.gguf")); err == nil {
		t.Error("missing file")
	}
}

func TestGGUFTokenizerVocabOnly(t *testing.T) {
	p := filepath.Join(ggufSharedDir(t), "fixtures", "llama-cpp-vocab", "ggml-vocab-llama-spm.gguf")
	f, err := gguf.Open(p)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	tok, err := GGUFTokenizer(f)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(tok.Files["gguf_vocab.json"], &v); err != nil {
		t.Fatal(err)
	}
	if v["tokenizer.ggml.model"] != "llama" || len(v["tokenizer.ggml.tokens"].([]any)) != 32000 {
		t.Errorf("vocab: model %v", v["tokenizer.ggml.model"])
	}
}

// The GGUF llama layout is the interleaved permutation of the HF one:
// permuting HF's q/k rows as writer.SaveGGUF does gives llama.cpp's bytes.
func TestSaveGGUFRoundTrip(t *testing.T) {
	m, err := FromGGUF(ggufStoriesPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := filepath.Join(t.TempDir(), "out.gguf")
	if err := writer.SaveGGUF(m, p, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	b, err := FromGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !reflect.DeepEqual(b.Arch, m.Arch) || !reflect.DeepEqual(b.Tokenizer, m.Tokenizer) {
		t.Errorf("arch or tokenizer differs:\n%+v\n%+v", b.Arch, m.Arch)
	}
	for _, n := range m.Weights.Names() {
		x, _ := m.Weights.Tensor(n)
		y, ok := b.Weights.Tensor(n)
		if !ok || !bytes.Equal(x.Data, y.Data) || !reflect.DeepEqual(x.Shape, y.Shape) {
			t.Errorf("%s differs", n)
		}
	}
	// The tokenizer keys keep llama.cpp's types.
	f, _ := gguf.Open(p)
	defer f.Close()
	for k, want := range map[string]any{
		"tokenizer.ggml.token_type":   []int32{},
		"tokenizer.ggml.scores":       []float32{},
		"tokenizer.ggml.bos_token_id": uint32(0),
		"llama.block_count":           uint32(0),
	} {
		if reflect.TypeOf(f.Metadata[k]) != reflect.TypeOf(want) {
			t.Errorf("%s has type %T", k, f.Metadata[k])
		}
	}
}

func TestSaveGGUFNeoXLlama(t *testing.T) {
	m, err := FromGGUF(ggufStoriesPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// An HF-style model: rotate-half q/k rows (the inverse permutation).
	w := model.MapWeights{}
	for _, n := range m.Weights.Names() {
		w[n], _ = m.Weights.Tensor(n)
	}
	neox := *m
	neox.Weights = w
	neox.Arch.Layers = nil
	for i, l := range m.Arch.Layers {
		at := *l.Attn
		at.Rope.Style = model.RopeNeoX
		l.Attn = &at
		neox.Arch.Layers = append(neox.Arch.Layers, l)
		for _, s := range []struct {
			n     string
			heads int
		}{{model.AttnQ, 8}, {model.AttnK, 4}} {
			name := model.LayerTensor(i, s.n)
			g := w[name]
			d := g.Shape[0] / s.heads
			rb := 4 * g.Shape[1]
			inv := make([]byte, len(g.Data))
			for h := range s.heads {
				for j := range d / 2 {
					for two := range 2 {
						src := h*d + 2*j + two
						dst := h*d + two*(d/2) + j
						copy(inv[dst*rb:(dst+1)*rb], g.Data[src*rb:(src+1)*rb])
					}
				}
			}
			w[name] = &tensor.Tensor{Name: name, Codec: g.Codec, Shape: g.Shape, Data: inv}
		}
	}
	p := filepath.Join(t.TempDir(), "neox.gguf")
	if err := writer.SaveGGUF(&neox, p, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	b, err := FromGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, n := range m.Weights.Names() {
		x, _ := m.Weights.Tensor(n)
		y, _ := b.Weights.Tensor(n)
		if !bytes.Equal(x.Data, y.Data) {
			t.Errorf("%s differs after permuting back", n)
		}
	}
	if b.Arch.Layers[0].Attn.Rope.Style != model.RopeInterleaved {
		t.Error("style")
	}
}

func TestSaveGGUFRefuses(t *testing.T) {
	m, err := FromGGUF(ggufStoriesPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	bad := *m
	bad.Arch.Layers = slices.Clone(m.Arch.Layers)
	at := *bad.Arch.Layers[2].Attn
	at.Scale = 0.5
	bad.Arch.Layers[2].Attn = &at
	err = writer.SaveGGUF(&bad, filepath.Join(t.TempDir(), "x.gguf"), writer.SaveOptions{Keep: true})
	if err == nil || !strings.Contains(err.Error(), "cannot be expressed") {
		t.Errorf("scale 0.5: %v", err)
	}
	bad = *m
	bad.Arch.Family = "gpt2"
	if err := writer.SaveGGUF(&bad, filepath.Join(t.TempDir(), "y.gguf"), writer.SaveOptions{Keep: true}); err == nil {
		t.Error("gpt2 accepted")
	}
}

func TestSaveGGUFFamilies(t *testing.T) {
	qwen2 := ggufTinyLlama("qwen2")
	for i := range 2 {
		qwen2.tensors[model.LayerTensor(i, model.AttnQBias)] = []int{32}
		qwen2.tensors[model.LayerTensor(i, model.AttnKBias)] = []int{16}
		qwen2.tensors[model.LayerTensor(i, model.AttnVBias)] = []int{16}
	}
	gemma2 := ggufTinyLlama("gemma2")
	delete(gemma2.tensors, model.Output)
	gemma2.meta["gemma2.attention.sliding_window"] = uint32(16)
	gemma2.meta["gemma2.attn_logit_softcapping"] = float32(50)
	gemma2.meta["gemma2.final_logit_softcapping"] = float32(30)
	phi3 := ggufTinyLlama("phi3")
	for i := range 2 {
		for _, s := range []string{model.AttnQ, model.AttnK, model.AttnV, model.FFNGate} {
			delete(phi3.tensors, model.LayerTensor(i, s))
		}
		phi3.tensors[model.LayerTensor(i, "attn_qkv.weight")] = []int{64, 32}
		phi3.tensors[model.LayerTensor(i, model.FFNUp)] = []int{128, 32}
	}
	llama3 := ggufTinyLlama("llama")
	llama3.meta["llama.rope.scaling.type"] = "linear"
	llama3.meta["llama.rope.scaling.factor"] = float32(4)
	for _, g := range []*ggufTiny{qwen2, gemma2, phi3, llama3} {
		m, err := FromGGUF(g.write(t))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "again.gguf")
		if err := writer.SaveGGUF(m, p, writer.SaveOptions{Keep: true}); err != nil {
			t.Fatalf("%s: %v", g.arch, err)
		}
		b, err := FromGGUF(p)
		if err != nil {
			t.Fatalf("%s: %v", g.arch, err)
		}
		if !reflect.DeepEqual(b.Arch, m.Arch) {
			t.Errorf("%s: arch differs:\n%+v\n%+v", g.arch, b.Arch, m.Arch)
		}
		for _, n := range m.Weights.Names() {
			x, _ := m.Weights.Tensor(n)
			y, ok := b.Weights.Tensor(n)
			if !ok || !bytes.Equal(x.Data, y.Data) {
				t.Errorf("%s: %s differs", g.arch, n)
			}
		}
		b.Close()
		m.Close()
	}
}

// A Gemma model with Hugging Face's (1+w) norms is written with the 1 added,
// as llama.cpp's converter does, and reads back as plain RMS norms.
func TestSaveGGUFGemmaPlusOne(t *testing.T) {
	g := ggufTinyLlama("gemma")
	delete(g.tensors, model.Output)
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hf := *m
	hf.Arch.Norm = model.NormRMSPlusOne
	w := model.MapWeights{}
	for _, n := range m.Weights.Names() {
		x, _ := m.Weights.Tensor(n)
		if strings.HasSuffix(n, "norm.weight") {
			v := make([]float32, x.Elements())
			tensor.Dequantize(v, x.Codec, x.Data)
			for i := range v {
				v[i]--
			}
			y := &tensor.Tensor{Name: n, Codec: tensor.F32, Shape: x.Shape, Data: make([]byte, 4*len(v))}
			tensor.Quantize(y.Data, tensor.F32, v)
			x = y
		}
		w[n] = x
	}
	hf.Weights = w
	p := filepath.Join(t.TempDir(), "gemma.gguf")
	if err := writer.SaveGGUF(&hf, p, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	b, err := FromGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Arch.Norm != model.NormRMS || !reflect.DeepEqual(b.Arch, m.Arch) {
		t.Errorf("arch %+v", b.Arch)
	}
	for _, n := range m.Weights.Names() {
		x, _ := m.Weights.Tensor(n)
		y, _ := b.Weights.Tensor(n)
		xv := make([]float32, x.Elements())
		yv := make([]float32, y.Elements())
		tensor.Dequantize(xv, x.Codec, x.Data)
		tensor.Dequantize(yv, y.Codec, y.Data)
		for i := range xv {
			if math.Abs(float64(xv[i]-yv[i])) > 1e-6 {
				t.Fatalf("%s[%d]: %g vs %g", n, i, yv[i], xv[i])
			}
		}
	}
}

func TestFromGGUFMoE(t *testing.T) {
	for _, c := range []struct {
		arch     string
		normTopK bool
		shared   bool
	}{{"llama", true, false}, {"qwen2moe", false, true}, {"qwen3moe", true, false}} {
		g := ggufTinyLlama(c.arch)
		g.meta[c.arch+".expert_count"] = uint32(4)
		g.meta[c.arch+".expert_used_count"] = uint32(2)
		if c.arch != "llama" {
			g.meta[c.arch+".expert_feed_forward_length"] = uint32(16)
		}
		ff := 16
		if c.arch == "llama" {
			ff = 64
		}
		for i := range 2 {
			for _, s := range []string{model.FFNGate, model.FFNUp, model.FFNDown} {
				delete(g.tensors, model.LayerTensor(i, s))
			}
			g.tensors[model.LayerTensor(i, model.FFNRouter)] = []int{4, 32}
			g.tensors[model.LayerTensor(i, model.FFNGateExps)] = []int{4, ff, 32}
			g.tensors[model.LayerTensor(i, model.FFNUpExps)] = []int{4, ff, 32}
			g.tensors[model.LayerTensor(i, model.FFNDownExps)] = []int{4, 32, ff}
			if c.shared {
				g.tensors[model.LayerTensor(i, model.FFNGateShexp)] = []int{24, 32}
				g.tensors[model.LayerTensor(i, model.FFNUpShexp)] = []int{24, 32}
				g.tensors[model.LayerTensor(i, model.FFNDownShexp)] = []int{32, 24}
				g.tensors[model.LayerTensor(i, model.FFNShexpGate)] = []int{1, 32}
			}
		}
		m, err := FromGGUF(g.write(t))
		if err != nil {
			t.Fatalf("%s: %v", c.arch, err)
		}
		l := m.Arch.Layers[1]
		want := &model.MoE{Experts: 4, TopK: 2, ExpertHidden: ff, NormTopK: c.normTopK, Scoring: "softmax"}
		if c.shared {
			want.SharedHidden, want.SharedGate = 24, true
		}
		if l.FFN != model.FFNMoE || !reflect.DeepEqual(l.MoE, want) {
			t.Errorf("%s: %+v %+v", c.arch, l, l.MoE)
		}
		m.Close()
	}
}

func TestFromGGUFPerLayerArrays(t *testing.T) {
	g := ggufTinyLlama("llama")
	g.meta["llama.feed_forward_length"] = []int32{64, 32}
	g.meta["llama.attention.head_count_kv"] = []uint32{2, 2}
	g.tensors[model.LayerTensor(1, model.FFNGate)] = []int{32, 32}
	g.tensors[model.LayerTensor(1, model.FFNUp)] = []int{32, 32}
	g.tensors[model.LayerTensor(1, model.FFNDown)] = []int{32, 32}
	m, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Arch.Layers[0].FFNHidden != 64 || m.Arch.Layers[1].FFNHidden != 32 || m.Arch.Layers[1].Attn.KVHeads != 2 {
		t.Errorf("per-layer values: %+v", m.Arch.Layers)
	}
	m.Close()
	g.meta["llama.feed_forward_length"] = []int32{64}
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), "need layer 1") {
		t.Errorf("short array: %v", err)
	}
	g.meta["llama.feed_forward_length"] = "64"
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), "want an integer") {
		t.Errorf("string value: %v", err)
	}
	g.meta["llama.feed_forward_length"] = uint32(64)
	g.meta["llama.embedding_length"] = []uint32{32, 16}
	if _, err := FromGGUF(g.write(t)); err == nil || !strings.Contains(err.Error(), "varies per layer") {
		t.Errorf("varying scalar: %v", err)
	}
}

func TestSaveGGUFLlama3(t *testing.T) {
	g := ggufTinyLlama("llama")
	m0, err := FromGGUF(g.write(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m0.Close()
	m := *m0
	m.Arch.Layers = nil
	for _, l := range m0.Arch.Layers {
		at := *l.Attn
		at.Rope.Scaling = model.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
		l.Attn = &at
		m.Arch.Layers = append(m.Arch.Layers, l)
	}
	p := filepath.Join(t.TempDir(), "l3.gguf")
	if err := writer.SaveGGUF(&m, p, writer.SaveOptions{Keep: true}); err != nil {
		t.Fatal(err)
	}
	b, err := FromGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !reflect.DeepEqual(b.Arch, m.Arch) {
		t.Errorf("arch:\n%+v\n%+v", b.Arch.Layers[0].Attn, m.Arch.Layers[0].Attn)
	}
	if _, ok := b.Weights.Tensor("rope_freqs.weight"); ok {
		t.Error("rope_freqs tensor kept in the weights")
	}
	if f, err := gguf.Open(p); err != nil {
		t.Fatal(err)
	} else if _, ok := f.Info("rope_freqs.weight"); !ok {
		t.Error("no rope_freqs tensor in the file")
	} else {
		f.Close()
	}
	// Llama 3 factors other than 1 and 4 cannot be expressed.
	m.Arch.Layers[0].Attn.Rope.Scaling.HighFreqFactor = 2
	if err := writer.SaveGGUF(&m, p, writer.SaveOptions{Keep: true}); err == nil {
		t.Error("high_freq_factor 2 accepted")
	}
}

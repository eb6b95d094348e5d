package webgpu

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// synthetic builds a llama-shaped model with random weights in codec c.
func synthetic(tb testing.TB, c tensor.Codec, vocab, hidden, ffn, layers, heads, kvHeads int) *model.Model {
	r := rand.New(rand.NewPCG(42, 7))
	w := model.MapWeights{}
	mat := func(name string, rows, cols int) {
		f := make([]float32, rows*cols)
		for i := range f {
			f[i] = (r.Float32()*2 - 1) * 0.05
		}
		n, err := tensor.ByteLen(c, []int{rows, cols})
		if err != nil {
			tb.Fatal(err)
		}
		data := make([]byte, n)
		if err := tensor.Quantize(data, c, f); err != nil {
			tb.Fatal(err)
		}
		w[name] = &tensor.Tensor{Name: name, Codec: c, Shape: []int{rows, cols}, Data: data}
	}
	vec := func(name string, n int) {
		f := make([]float32, n)
		for i := range f {
			f[i] = 1 + (r.Float32()*2-1)*0.1
		}
		w[name] = &tensor.Tensor{Name: name, Codec: tensor.F32, Shape: []int{n}, Data: gpu.F32Bytes(f)}
	}
	hd := hidden / heads
	mat(model.TokenEmbd, vocab, hidden)
	mat(model.Output, vocab, hidden)
	vec(model.OutputNorm, hidden)
	a := model.Arch{Family: "synthetic", Vocab: vocab, Hidden: hidden, Context: 4096, NormEps: 1e-5,
		Norm: model.NormRMS, Act: model.ActSiLU, EmbedScale: 1, ResidualScale: 1, LogitScale: 1, BOS: -1}
	for i := 0; i < layers; i++ {
		a.Layers = append(a.Layers, model.Layer{Mixer: model.MixerAttention, FFN: model.FFNDense, FFNHidden: ffn,
			PreMixerNorm: true, PreFFNNorm: true,
			Attn: &model.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 1 / float32(hd),
				Rope: model.Rope{Theta: 10000, Dims: hd, Style: model.RopeNeoX}}})
		n := func(s string) string { return model.LayerTensor(i, s) }
		vec(n(model.AttnNorm), hidden)
		vec(n(model.FFNNorm), hidden)
		mat(n(model.AttnQ), heads*hd, hidden)
		mat(n(model.AttnK), kvHeads*hd, hidden)
		mat(n(model.AttnV), kvHeads*hd, hidden)
		mat(n(model.AttnOut), hidden, heads*hd)
		mat(n(model.FFNGate), ffn, hidden)
		mat(n(model.FFNUp), ffn, hidden)
		mat(n(model.FFNDown), hidden, ffn)
	}
	return &model.Model{Arch: a, Weights: w}
}

// TestWideVocab drives a head of more than 65535 rows (a 2-D grid) and a
// 64-wide head dimension through the backend, checked through
// Forward vs ForwardGreedy consistency and the far rows being written.
func TestWideVocab(t *testing.T) {
	d := testDevice(t)
	m := synthetic(t, tensor.Q8_0, 66000, 64, 64, 1, 1, 1)
	b, err := New(m, Options{Device: d})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.newSession(8)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Forward([]int{65999, 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The last rows of the head must be computed: compare with the host.
	nonzero := 0
	for _, v := range l[65535:] {
		if v != 0 {
			nonzero++
		}
	}
	if nonzero < 400 {
		t.Fatalf("head rows past 65535 not computed (%d nonzero)", nonzero)
	}
	want := argmaxF(l)
	s.Reset()
	if _, err := s.Forward([]int{65999}, false); err != nil {
		t.Fatal(err)
	}
	got, err := s.ForwardGreedy(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != want {
		t.Fatalf("greedy %d, Forward argmax %d", got[0], want)
	}
}

// benchModel is the synthetic benchmark model: small enough for lavapipe
// by default; CORTIQ_BENCH_DIMS="hidden,ffn,layers,heads,kv_heads,vocab"
// sizes it for a real GPU (e.g. "2048,8192,16,32,8,128256" ~ a 1B llama).
func benchModel(b *testing.B, c tensor.Codec) *model.Model {
	dims := []int{512, 1536, 4, 8, 4, 8000}
	if v := os.Getenv("CORTIQ_BENCH_DIMS"); v != "" {
		parts := strings.Split(v, ",")
		if len(parts) != len(dims) {
			b.Fatalf("CORTIQ_BENCH_DIMS %q: want %d comma-separated numbers", v, len(dims))
		}
		for i, p := range parts {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || n <= 0 {
				b.Fatalf("CORTIQ_BENCH_DIMS %q: %q", v, p)
			}
			dims[i] = n
		}
	}
	return synthetic(b, c, dims[5], dims[0], dims[1], dims[2], dims[3], dims[4])
}

func benchDecode(b *testing.B, c tensor.Codec, greedy int) {
	d := testDevice(b)
	m := benchModel(b, c)
	be, err := New(m, Options{Device: d})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	s, err := be.newSession(4096)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Forward([]int{1, 2, 3, 4}, false); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(be.Stats().WeightBytesToken)
	b.ResetTimer()
	tok := 5
	for i := 0; i < b.N; i++ {
		if s.Len()+max(greedy, 1) >= 4096 {
			s.Reset()
		}
		if greedy > 0 {
			ids, err := s.ForwardGreedy(tok, greedy)
			if err != nil {
				b.Fatal(err)
			}
			tok = ids[len(ids)-1]
			continue
		}
		l, err := s.Forward([]int{tok}, false)
		if err != nil {
			b.Fatal(err)
		}
		tok = argmaxF(l)
	}
	if greedy > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*greedy), "ns/token")
	}
}

// Decode step latency on the synthetic model (f16 and q4_0 weights); the
// MB/s column is weight bytes read per second. On the GPU machine:
// CORTIQ_BENCH_DIMS=2048,8192,16,32,8,128256 go test -run XXX -bench . ./webgpu/
func BenchmarkDecodeF16(b *testing.B)        { benchDecode(b, tensor.F16, 0) }
func BenchmarkDecodeQ4_0(b *testing.B)       { benchDecode(b, tensor.Q4_0, 0) }
func BenchmarkDecodeF16Greedy8(b *testing.B) { benchDecode(b, tensor.F16, 8) }

func BenchmarkPrefillF16(b *testing.B) {
	d := testDevice(b)
	m := benchModel(b, tensor.F16)
	be, err := New(m, Options{Device: d, Chunk: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	s, err := be.newSession(512)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	prompt := make([]int, 256)
	for i := range prompt {
		prompt[i] = i + 1
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Reset()
		if _, err := s.Forward(prompt, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(prompt)), "ns/token")
}

package webgpu

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

var moeFixtures = []string{"qwen2_moe", "qwen3_moe", "mixtral"}

// TestParityMoE runs the routed-expert fixtures (softmax routing, top-k,
// shared expert with its sigmoid gate) against transformers' logits.
func TestParityMoE(t *testing.T) { parityDense(t, moeFixtures) }

// TestParityHybrid runs the hybrid-mixer fixtures: LFM2's short conv and
// qwen3_next's gated DeltaNet with output-gated partial-rotary attention
// and a routed MoE with a shared expert.
func TestParityHybrid(t *testing.T) { parityDense(t, []string{"lfm2", "qwen3_next"}) }

// TestParityGptOss runs the gpt-oss fixtures (attention sinks, alternating
// sliding/full layers, YaRN, biases, top-k-softmax routing with a router
// bias, biased experts with the clamped SwiGLU) against transformers'
// logits, whole-span and with split-K attention over 8-position splits
// (the sink joins split 0's partial).
func TestParityGptOss(t *testing.T) {
	parityDense(t, fixtures.InRepo)
	t.Run("splitK", func(t *testing.T) {
		splitLenOverride = 8
		defer func() { splitLenOverride = 0 }()
		parityDense(t, fixtures.InRepo)
	})
	// One 48-token step (prompt and continuation): tiled attention and
	// the expert gemm, against the CPU backend's logits.
	t.Run("tiled", func(t *testing.T) {
		d := testDevice(t)
		for _, name := range fixtures.InRepo {
			m, ref := loadFixture(t, name)
			ids := append(append([]int(nil), ref.InputIDs...), ref.Generated...)
			cb, err := cpu.New(m, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cs, _ := cb.NewSession(len(ids))
			want, err := cs.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			b, err := New(m, Options{Device: d, Chunk: 64})
			if err != nil {
				t.Fatal(err)
			}
			s, err := b.newSession(64)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, name+" one step", got, want, m.Arch.Vocab, parityTol)
			s.Close()
			b.Close()
		}
	})
}

// TestGGUFGptOss loads the gpt-oss fixtures from "gpt-oss" GGUFs with
// quantized expert banks (writer.QuantizeExperts + SaveGGUF): with q8_0
// experts the device runs them, every prompt logit within 2e-3 of the CPU
// on the same file (its exact path); MXFP4 experts (what gpt-oss GGUFs ship) run the same
// way once a device kernel reads mxfp4, and until then are refused with
// ErrUnsupported naming the codec, so the engine runs them on the CPU.
func TestGGUFGptOss(t *testing.T) {
	d := testDevice(t)
	// The CPU reference on its exact path: by default its one-token
	// products (an expert that got one token) use int8 activations.
	defer kernel.SetMode(kernel.SetMode(kernel.Exact))
	for _, c := range []tensor.Codec{tensor.Q8_0, tensor.MXFP4} {
		t.Run(c.String(), func(t *testing.T) {
			m, ref := loadFixture(t, "gpt_oss")
			q, err := writer.QuantizeExperts(m, c)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "gpt-oss.gguf")
			if err := writer.SaveGGUF(q, path, writer.SaveOptions{Keep: true}); err != nil {
				t.Fatal(err)
			}
			g, err := importer.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			b, err := New(g, Options{Device: d, Chunk: 16})
			if err != nil {
				if c == tensor.MXFP4 && errors.Is(err, ErrUnsupported) && strings.Contains(err.Error(), "mxfp4") {
					t.Logf("refused (the CPU runs it): %v", err)
					return
				}
				t.Fatal(err)
			}
			defer b.Close()
			cb, err := cpu.New(g, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cs, _ := cb.NewSession(64)
			want, err := cs.Forward(ref.InputIDs, true)
			if err != nil {
				t.Fatal(err)
			}
			s, err := b.newSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, err := s.Forward(ref.InputIDs, true)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, c.String()+" experts", got, want, g.Arch.Vocab, parityTol)
		})
	}
}

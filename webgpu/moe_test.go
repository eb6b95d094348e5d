package webgpu

import (
	"testing"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/fixtures"
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

package webgpu

import "testing"

var moeFixtures = []string{"qwen2_moe", "qwen3_moe", "mixtral"}

// TestParityMoE runs the routed-expert fixtures (softmax routing, top-k,
// shared expert with its sigmoid gate) against transformers' logits.
func TestParityMoE(t *testing.T) { parityDense(t, moeFixtures) }

// TestParityHybrid runs the hybrid-mixer fixtures: LFM2's short conv and
// qwen3_next's gated DeltaNet with output-gated partial-rotary attention
// and a routed MoE with a shared expert.
func TestParityHybrid(t *testing.T) { parityDense(t, []string{"lfm2", "qwen3_next"}) }

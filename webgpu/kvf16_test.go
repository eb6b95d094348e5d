package webgpu

import (
	"slices"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// kvF16Tol bounds the f16 KV cache's logits against transformers (f32):
// keys and values rounded to 11 significant bits moved the fixtures'
// logits by up to 2.9e-2 on lavapipe (granite; most by 1e-3..1e-2: logged per
// fixture).
const kvF16Tol = 5e-2

// TestKVF16Device: every fixture family with the KV cache in half
// precision (prompt in chunks of 16, the split-K and tiled kernels, cached
// decode fed the reference's greedy tokens) stays within kvF16Tol of
// transformers and picks the reference's greedy tokens; the difference from
// the f32 cache is logged.
func TestKVF16Device(t *testing.T) {
	d := testDevice(t)
	for _, name := range slices.Concat(fixtures.Dense, fixtures.Hybrid) {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			vocab := m.Arch.Vocab
			run := func(f16 bool) (prompt, steps []float32) {
				_, s := testSession(t, m, Options{Device: d, Chunk: 16, KVF16: f16}, 64)
				prompt, err := s.Forward(ref.InputIDs, true)
				if err != nil {
					t.Fatal(err)
				}
				s.Reset()
				last, err := s.Forward(ref.InputIDs, false)
				if err != nil {
					t.Fatal(err)
				}
				steps = append(steps, last...)
				for _, tok := range ref.Generated[:len(ref.Generated)-1] {
					l, err := s.Forward([]int{tok}, false)
					if err != nil {
						t.Fatal(err)
					}
					steps = append(steps, l...)
				}
				return prompt, steps
			}
			p16, s16 := run(true)
			p32, s32 := run(false)
			dp, _ := maxAbsDiff(p16, p32)
			ds, _ := maxAbsDiff(s16, s32)
			rp, _ := maxAbsDiff(p16, ref.Logits)
			rs, _ := maxAbsDiff(s16, ref.StepLogits)
			t.Logf("kv f16: max |Δlogit| vs the f32 cache %.2e (prompt) %.2e (decode); vs transformers %.2e / %.2e", dp, ds, rp, rs)
			checkRows(t, "prompt (kv f16)", p16, ref.Logits, vocab, kvF16Tol)
			checkRows(t, "decode (kv f16)", s16, ref.StepLogits, vocab, kvF16Tol)
		})
	}
}

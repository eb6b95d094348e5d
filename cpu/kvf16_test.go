package cpu

import (
	"slices"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// kvF16Tol bounds the f16 KV cache's logits against transformers: keys and
// values rounded to 11 significant bits move the fixtures' logits by up to
// a few 1e-2 (logged per fixture), which is why f32 stays the default.
const kvF16Tol = 5e-2

// TestKVF16: every fixture family with the KV cache in half precision
// (the prompt in one step, then cached decode fed the reference's greedy
// tokens) stays within kvF16Tol of transformers; the difference from the
// f32 cache is logged; sliding-window rings in half precision equal the
// full-length half-precision cache bit for bit.
func TestKVF16(t *testing.T) {
	for _, name := range slices.Concat(fixtures.Dense, fixtures.Hybrid) {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			run := func(opts Options) (prompt, steps []float32) {
				b, err := New(m, opts)
				if err != nil {
					t.Fatal(err)
				}
				s, _ := b.newSession(64)
				if prompt, err = s.Forward(ref.InputIDs, true); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, prompt[len(prompt)-m.Arch.Vocab:]...)
				for _, tok := range ref.Generated[:len(ref.Generated)-1] {
					l, err := s.Forward([]int{tok}, false)
					if err != nil {
						t.Fatal(err)
					}
					steps = append(steps, l...)
				}
				return prompt, steps
			}
			p16, s16 := run(Options{KVF16: true})
			p32, s32 := run(Options{})
			dp, _ := maxAbsDiff(p16, p32)
			ds, _ := maxAbsDiff(s16, s32)
			t.Logf("kv f16: max |Δlogit| vs the f32 cache %.2e (prompt) %.2e (decode)", dp, ds)
			for _, c := range []struct {
				what      string
				got, want []float32
			}{{"prompt", p16, ref.Logits}, {"decode", s16, ref.StepLogits}} {
				if d, at := maxAbsDiff(c.got, c.want); d > kvF16Tol {
					t.Errorf("%s logits with an f16 KV cache off by %g at %d", c.what, d, at)
				}
			}
			pf, sf := run(Options{KVF16: true, FullKV: true})
			if d, _ := maxAbsDiff(pf, p16); d != 0 {
				t.Errorf("f16 ring and full-length prompt logits differ by %g", d)
			}
			if d, _ := maxAbsDiff(sf, s16); d != 0 {
				t.Errorf("f16 ring and full-length decode logits differ by %g", d)
			}
		})
	}
}

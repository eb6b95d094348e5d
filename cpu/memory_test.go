package cpu

import (
	"testing"
)

// SessionBytes' KV and state are what a full session holds, with rings,
// f16 halves and recurrent states.
func TestSessionBytes(t *testing.T) {
	for _, name := range []string{"llama", "mistral_sw8", "gemma3_text_sw8", "lfm2", "qwen3_next"} {
		for _, opts := range []Options{{}, {KVF16: true}, {FullKV: true, RewindDepth: 7}} {
			m, _ := loadFixture(t, name)
			b, err := New(m, opts)
			if err != nil {
				t.Fatal(err)
			}
			const maxLen = 40
			s, _ := b.newSession(maxLen)
			if _, err := s.Forward(make([]int, maxLen), false); err != nil {
				t.Fatal(err)
			}
			est := SessionBytes(&m.Arch, maxLen, maxLen, opts)
			if got := s.ResidentBytes(); est.KV+est.State != got {
				t.Errorf("%s %+v: estimated KV %d + state %d, the session holds %d", name, opts, est.KV, est.State, got)
			}
			if est.Activations <= 0 {
				t.Errorf("%s: no activations estimated", name)
			}
		}
	}
}

package webgpu

import (
	"strings"
	"testing"
)

// SessionBytes' KV is what a session allocates for it exactly, and its
// total is within a quarter of the session's resident bytes.
func TestSessionBytes(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"llama", "mistral_sw8", "gemma3_text_sw8", "lfm2"} {
		for _, opts := range []Options{{Device: d, Chunk: 16}, {Device: d, Chunk: 16, KVF16: true}} {
			m, _ := loadFixture(t, name)
			_, s := testSession(t, m, opts, 200)
			est := SessionBytes(&m.Arch, 200, opts)
			if got := kvBytes(s); est.KV != got {
				t.Errorf("%s: estimated KV %d bytes, allocated %d", name, est.KV, got)
			}
			if r := float64(est.Total()) / float64(s.ResidentBytes()); r < 0.75 || r > 1.25 {
				t.Errorf("%s: estimated %d bytes, the session holds %d", name, est.Total(), s.ResidentBytes())
			}
			t.Logf("%s kv f16=%v: estimated %+v, resident %d", name, opts.KVF16, est, s.ResidentBytes())
		}
	}
}

// With ReserveContext, a budget that holds the weights but not a session
// of that context is refused, naming what the context needs; a context
// that fits leaves the device fewer bytes for layers.
func TestReserveContext(t *testing.T) {
	d := testDevice(t)
	m, _ := loadFixture(t, "llama")
	need := SessionBytes(&m.Arch, 4096, Options{})
	_, err := New(m, Options{Device: d, VRAMBudget: need.Total(), ReserveContext: 4096})
	if err == nil || !strings.Contains(err.Error(), "a context of 4096 positions needs") {
		t.Fatalf("a budget of the session alone: %v", err)
	}
	b, err := New(m, Options{Device: d, VRAMBudget: 1 << 30, ReserveContext: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

package webgpu

import (
	"strings"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cpu"
)

// The sliding-window fixtures (window 8, a 24-token prompt) on the device
// with KV rings (steps of 4 tokens: a ring of 12 rows wraps many times):
// prompt logits within the device tolerance of transformers, and
// generation far past the window (one by one, in batched steps, greedy
// batches, rewinds, an imported state) equal to a session that keeps
// every position. The KV bytes per token before and after are logged.
func TestRingKVDevice(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"mistral_sw8", "gemma2_sw8", "gemma3_text_sw8", "gemma2_sw8/kv_f16"} {
		t.Run(name, func(t *testing.T) {
			name, f16 := strings.CutSuffix(name, "/kv_f16")
			m, ref := loadFixture(t, name)
			const maxLen = 80
			_, rs := testSession(t, m, Options{Device: d, Chunk: 4, RewindDepth: 4, KVF16: f16}, maxLen)
			_, fs := testSession(t, m, Options{Device: d, Chunk: 4, RewindDepth: 4, KVF16: f16, FullKV: true}, maxLen)
			if !rs.ringed() || fs.ringed() {
				t.Fatalf("ringed: %v with rings, %v with full KV", rs.ringed(), fs.ringed())
			}
			vocab := m.Arch.Vocab
			p := ref.InputIDs
			got, err := rs.Forward(p, true)
			if err != nil {
				t.Fatal(err)
			}
			tol := 2e-3
			if f16 {
				tol = kvF16Tol
			}
			checkRows(t, "prompt logits", got, ref.Logits, vocab, tol)
			if _, err := fs.Forward(p, true); err != nil {
				t.Fatal(err)
			}
			tok := argmaxF(got[len(got)-vocab:])
			step := func(toks []int) {
				t.Helper()
				a, err := rs.Forward(toks, true)
				if err != nil {
					t.Fatal(err)
				}
				b, err := fs.Forward(toks, true)
				if err != nil {
					t.Fatal(err)
				}
				if dd, at := maxAbsDiff(a, b); dd != 0 {
					t.Fatalf("at %d: ring and full-KV logits differ by %g at %d", rs.Len(), dd, at)
				}
				tok = argmaxF(a[len(a)-vocab:])
			}
			for range 12 {
				step([]int{tok})
			}
			step([]int{tok, 5, 9, 2, 11, 3, 8, 1, 4, 6, 7})
			for _, j := range []int{1, 3, rs.Rewindable()} {
				if err := rs.Rewind(j); err != nil {
					t.Fatal(err)
				}
				if err := fs.Rewind(j); err != nil {
					t.Fatal(err)
				}
				step([]int{tok})
				step([]int{tok, 12})
			}
			if err := rs.Rewind(rs.Rewindable() + 1); err == nil {
				t.Fatal("rewind past the ring's depth accepted")
			}
			a, err := rs.ForwardGreedy(tok, 10)
			if err != nil {
				t.Fatal(err)
			}
			b, err := fs.ForwardGreedy(tok, 10)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("greedy ids %v with rings, %v with full KV", a, b)
				}
			}
			tok = a[len(a)-1]
			for rs.Len() < maxLen-8 {
				step([]int{tok})
			}
			// An imported state (a CPU prefill) lands in the ring's rows.
			cb, err := cpu.New(m, cpu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cs, _ := cb.NewSession(maxLen)
			if _, err := cs.Forward(p, false); err != nil {
				t.Fatal(err)
			}
			st, err := cs.(backend.StateExporter).ExportState()
			if err != nil {
				t.Fatal(err)
			}
			rs.Reset()
			fs.Reset()
			if err := rs.ImportState(st); err != nil {
				t.Fatal(err)
			}
			if err := fs.ImportState(st); err != nil {
				t.Fatal(err)
			}
			for range 6 {
				step([]int{tok})
			}
			full := kvBytes(fs)
			ring := kvBytes(rs)
			t.Logf("KV bytes per token over %d positions (steps of 4): %d full, %d with rings", maxLen, full/maxLen, ring/maxLen)
		})
	}
}

func kvBytes(s *Session) int64 {
	var n int64
	for i := range s.kc {
		if s.kc[i] != nil && s.b.layers[i].at != nil {
			n += int64(s.kc[i].Size() + s.vc[i].Size())
		}
	}
	return n
}

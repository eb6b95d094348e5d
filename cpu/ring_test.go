package cpu

import (
	"testing"
)

// The sliding-window fixtures (window 8, a 24-token prompt) on a KV ring:
// prompt logits within parityTol of transformers, and generation far past
// the window (one by one, in batched steps, with rewinds) bit-equal to a
// session that keeps every position. The KV bytes per token before and
// after are logged.
func TestRingKV(t *testing.T) {
	defer func(p int) { ringPiece = p }(ringPiece)
	ringPiece = 1 // a ring of window + the rewind depth: the prompt alone wraps it
	for _, name := range []string{"mistral_sw8", "gemma2_sw8", "gemma3_text_sw8"} {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			ring, err := New(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			full, err := New(m, Options{FullKV: true})
			if err != nil {
				t.Fatal(err)
			}
			const maxLen = 96
			rs, _ := ring.newSession(maxLen)
			fs, _ := full.newSession(maxLen)
			rings := 0
			for _, c := range rs.caches {
				if c != nil && c.ring > 0 {
					rings++
				}
			}
			if rings == 0 {
				t.Fatal("no layer keeps a ring")
			}
			p := ref.InputIDs
			got, err := rs.Forward(p, true)
			if err != nil {
				t.Fatal(err)
			}
			if d, at := maxAbsDiff(got, ref.Logits); d > parityTol {
				t.Fatalf("prompt logits off by %g at %d", d, at)
			}
			if _, err := fs.Forward(p, true); err != nil {
				t.Fatal(err)
			}
			tok := argmax(got[len(got)-m.Arch.Vocab:])
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
				for i := range a {
					if a[i] != b[i] {
						t.Fatalf("at %d: ring logit %d = %g, full KV %g", rs.Len(), i, a[i], b[i])
					}
				}
				tok = argmax(a[len(a)-m.Arch.Vocab:])
			}
			for range 20 {
				step([]int{tok})
			}
			step([]int{tok, 5, 9, 2, 11, 3, 8, 1, 4, 6, 7}) // longer than the ring's pieces
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
			for rs.Len() < maxLen {
				step([]int{tok})
			}
			st, err := rs.ExportState()
			if err != nil {
				t.Fatal(err)
			}
			is, _ := ring.newSession(maxLen + 8)
			if err := is.ImportState(st); err != nil {
				t.Fatal(err)
			}
			fs2, _ := full.newSession(maxLen + 8)
			fst, _ := fs.ExportState()
			if err := fs2.ImportState(fst); err != nil {
				t.Fatal(err)
			}
			rs, fs = is, fs2
			step([]int{tok})
			t.Logf("KV bytes per token over %d positions: %d full, %d with rings", maxLen, kvBytes(full, maxLen)/maxLen, kvBytes(ring, maxLen)/maxLen)
		})
	}
}

func kvBytes(b *Backend, n int) int {
	s, _ := b.newSession(n)
	s.Forward(make([]int, n), false)
	total := 0
	for _, c := range s.caches {
		if c != nil {
			total += 4 * (len(c.k) + len(c.v))
		}
	}
	return total
}

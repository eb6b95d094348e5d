package cpu

import (
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/fixtures"
)

// Generate, roll back j tokens, regenerate: the logits equal, bit for bit,
// those of a session that never went there, for every fixture family,
// whether the tokens came one by one or in batched steps (the kept ones in
// a step of their own: a batch of another length rounds differently), and
// after rewinding twice in a row.
func TestRewind(t *testing.T) {
	defer func(p int) { ringPiece = p }(ringPiece)
	ringPiece = 1 // sliding-window layers keep rings of window + depth
	for _, name := range slices.Concat(fixtures.Dense, fixtures.Hybrid) {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			b, err := New(m, Options{RewindDepth: 5})
			if err != nil {
				t.Fatal(err)
			}
			vocab := m.Arch.Vocab
			p := ref.InputIDs
			x := []int{3, 17, 5, 29, 11, 7} // the tokens abandoned (partly)
			y := []int{13, 2, 19}           // the regenerated continuation
			recurrent := name == "lfm2" || name == "qwen3_next"
			// Sliding-window KV rings keep the window before the last
			// ring-window+1 ends (at least the depth).
			ringed := strings.HasSuffix(name, "_sw8")
			feed := func(s backend.Session, toks []int, batched bool) []float32 {
				t.Helper()
				if batched {
					l, err := s.Forward(toks, true)
					if err != nil {
						t.Fatal(err)
					}
					return l
				}
				var out []float32
				for _, tok := range toks {
					l, err := s.Forward([]int{tok}, false)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, l...)
				}
				return out
			}
			for _, batched := range []bool{false, true} {
				for _, j := range []int{1, 3, 5} {
					// The session that never went past x[:len(x)-j].
					want, _ := b.NewSession(64)
					feed(want, p, true)
					if len(x)-j > 0 {
						feed(want, x[:len(x)-j], batched)
					}
					wantY := feed(want, y, false)

					s, _ := b.NewSession(64)
					feed(s, p, true)
					if len(x)-j > 0 {
						feed(s, x[:len(x)-j], batched)
					}
					feed(s, x[len(x)-j:], batched)
					r := s.(backend.Rewinder)
					if recurrent && r.Rewindable() != 5 {
						t.Errorf("Rewindable %d after %d positions, want the depth 5", r.Rewindable(), s.Len())
					}
					if ringed && (r.Rewindable() < 5 || r.Rewindable() >= s.Len()) {
						t.Errorf("Rewindable %d of a ringed session at %d, want the depth 5 or more", r.Rewindable(), s.Len())
					}
					if !recurrent && !ringed && r.Rewindable() != s.Len() {
						t.Errorf("Rewindable %d of an attention-only session at %d", r.Rewindable(), s.Len())
					}
					if err := r.Rewind(j); err != nil {
						t.Fatal(err)
					}
					if s.Len() != len(p)+len(x)-j {
						t.Fatalf("Len %d after rewinding %d", s.Len(), j)
					}
					gotY := feed(s, y, false)
					if d, at := maxAbsDiff(gotY, wantY); d != 0 {
						t.Errorf("batched=%v rewind %d: logits differ by %g at step %d", batched, j, d, at/vocab)
					}
				}
			}
			// Two rewinds in a row stay within what is kept; past it, a
			// recurrent session refuses and changes nothing.
			s, _ := b.NewSession(64)
			feed(s, p, true)
			feed(s, x, false)
			r := s.(backend.Rewinder)
			if err := r.Rewind(2); err != nil {
				t.Fatal(err)
			}
			if err := r.Rewind(2); err != nil {
				t.Fatal(err)
			}
			if recurrent {
				if err := r.Rewind(2); err == nil {
					t.Errorf("rewinding 6 positions with a depth of 5 was accepted")
				}
			}
			gotY := feed(s, y, false)
			want, _ := b.NewSession(64)
			feed(want, p, true)
			feed(want, x[:2], false)
			if d, _ := maxAbsDiff(gotY, feed(want, y, false)); d != 0 {
				t.Errorf("after two rewinds: logits differ by %g", d)
			}
		})
	}
}

package webgpu

import (
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/fixtures"
)

// TestDropGreedyHybrid: a dropped greedy batch gives back its positions
// and the recurrent state it advanced (short-conv windows, DeltaNet
// matrices), so the next step's logits equal, bit for bit, those of a
// session that never submitted it. A batch longer than the rewind depth
// is refused rather than dropped inexactly.
func TestDropGreedyHybrid(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"llama", "lfm2", "qwen3_next"} {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			_, s := testSession(t, m, Options{Device: d, Chunk: 16, RewindDepth: 6}, 64)
			p := ref.InputIDs
			if _, err := s.Forward(p[:len(p)-1], false); err != nil {
				t.Fatal(err)
			}
			ids, err := s.ForwardGreedy(p[len(p)-1], 4)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.Forward([]int{ids[3]}, false)
			if err != nil {
				t.Fatal(err)
			}

			s.Reset()
			if _, err := s.Forward(p[:len(p)-1], false); err != nil {
				t.Fatal(err)
			}
			g1, err := s.SubmitGreedy(p[len(p)-1], 4)
			if err != nil {
				t.Fatal(err)
			}
			g2, err := s.SubmitGreedy(-1, 6)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CollectGreedy(g1); err != nil {
				t.Fatal(err)
			}
			if err := s.DropGreedy(g2); err != nil {
				t.Fatal(err)
			}
			got, err := s.Forward([]int{ids[3]}, false)
			if err != nil {
				t.Fatal(err)
			}
			if dd, at := maxAbsDiff(got, want); dd != 0 {
				t.Errorf("logits after a dropped batch differ by %g at %d", dd, at)
			}

			// Seven steps cannot be dropped with a depth of 6 (a model
			// without recurrent layers drops any number).
			g3, err := s.SubmitGreedy(-1, 7)
			if err != nil {
				s.Reset() // no greedy tail after a Forward: submit afresh
				if _, err := s.Forward(p, false); err != nil {
					t.Fatal(err)
				}
				if g3, err = s.SubmitGreedy(p[0], 7); err != nil {
					t.Fatal(err)
				}
			}
			err = s.DropGreedy(g3)
			if recurrent := name != "llama"; recurrent == (err == nil) {
				t.Errorf("dropping 7 steps with a depth of 6: %v", err)
			}
		})
	}
}

// TestRewindDevice is cpu.TestRewind on the device: generate, roll back j
// tokens, regenerate; the logits equal those of a session that never went
// there, bit for bit, for every fixture family.
func TestRewindDevice(t *testing.T) {
	d := testDevice(t)
	for _, name := range slices.Concat(fixtures.Dense, fixtures.Hybrid) {
		t.Run(name, func(t *testing.T) {
			m, ref := loadFixture(t, name)
			b, err := New(m, Options{Device: d, Chunk: 16, RewindDepth: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			vocab := m.Arch.Vocab
			p := ref.InputIDs
			x := []int{3, 17, 5, 29, 11, 7}
			y := []int{13, 2, 19}
			recurrent := name == "lfm2" || name == "qwen3_next"
			// Sliding-window KV rings keep the window before the last
			// ring-window+1 ends (at least the depth).
			ringed := strings.HasSuffix(name, "_sw8")
			feed := func(s *Session, toks []int, batched bool) []float32 {
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
			want, err := b.newSession(32)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			s, err := b.newSession(32)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, batched := range []bool{false, true} {
				for _, j := range []int{1, 4} {
					want.Reset()
					feed(want, p, true)
					feed(want, x[:len(x)-j], batched)
					wantY := feed(want, y, false)

					s.Reset()
					feed(s, p, true)
					feed(s, x[:len(x)-j], batched)
					feed(s, x[len(x)-j:], batched)
					if recurrent && s.Rewindable() != 5 {
						t.Errorf("Rewindable %d, want the depth 5", s.Rewindable())
					}
					if ringed && (s.Rewindable() < 5 || s.Rewindable() >= s.Len()) {
						t.Errorf("Rewindable %d of a ringed session at %d, want the depth 5 or more", s.Rewindable(), s.Len())
					}
					if !recurrent && !ringed && s.Rewindable() != s.Len() {
						t.Errorf("Rewindable %d of an attention-only session at %d", s.Rewindable(), s.Len())
					}
					if err := s.Rewind(j); err != nil {
						t.Fatal(err)
					}
					gotY := feed(s, y, false)
					if dd, at := maxAbsDiff(gotY, wantY); dd != 0 {
						t.Errorf("batched=%v rewind %d: logits differ by %g at step %d", batched, j, dd, at/vocab)
					}
				}
			}
			var _ backend.Rewinder = s
		})
	}
}

package cpu

import (
	"fmt"

	"github.com/cortiq/cortiq/backend"
)

var _ backend.StateExporter = (*Session)(nil)

// ExportState snapshots the session (copies; the session is unchanged) in
// backend.State's layout, which is this backend's own.
func (s *Session) ExportState() (*backend.State, error) {
	if s.caches == nil {
		return nil, fmt.Errorf("cpu: session is closed")
	}
	st := &backend.State{Pos: s.pos, Layers: make([]backend.LayerState, len(s.b.layers))}
	for i := range s.b.layers {
		l := &st.Layers[i]
		if c := s.caches[i]; c != nil {
			n := s.pos * c.width
			if c.ring == 0 && s.pos > c.rows() {
				return nil, fmt.Errorf("cpu: layer %d: KV cache holds %d of %d positions", i, c.rows(), s.pos)
			}
			// A ring's positions before the window are gone; they are
			// zeros in the snapshot (no sliding-window layer reads them).
			l.K, l.V = make([]float32, n), make([]float32, n)
			for p := c.kept(s.pos); p < s.pos; p++ {
				w := c.width
				k, v := c.get(p, 0, w, l.K[p*w:(p+1)*w], l.V[p*w:(p+1)*w])
				copy(l.K[p*w:(p+1)*w], k)
				copy(l.V[p*w:(p+1)*w], v)
			}
		}
		if c := s.conv[i]; c != nil {
			l.Conv = append([]float32(nil), s.live(c)...)
		}
		if d := s.delta[i]; d != nil {
			l.Conv = append([]float32(nil), s.live(d.conv)...)
			l.Delta = append([]float32(nil), s.live(d.s)...)
		}
	}
	return st, nil
}

var _ backend.StateImporter = (*Session)(nil)

// ImportState replaces the session's state with a copy of st.
func (s *Session) ImportState(st *backend.State) error {
	if s.caches == nil {
		return fmt.Errorf("cpu: session is closed")
	}
	L := len(s.b.layers)
	kv, conv, delta := make([]int, L), make([]int, L), make([]int, L)
	for i := range s.b.layers {
		if c := s.caches[i]; c != nil {
			kv[i] = c.width
		}
		if c := s.conv[i]; c != nil {
			conv[i] = len(c[0])
		}
		if d := s.delta[i]; d != nil {
			conv[i], delta[i] = len(d.conv[0]), len(d.s[0])
		}
	}
	if err := st.Check(kv, conv, delta); err != nil {
		return fmt.Errorf("cpu: import: %w", err)
	}
	if st.Pos > s.maxLen {
		return fmt.Errorf("cpu: import of %d positions into a session of %d", st.Pos, s.maxLen)
	}
	for i, l := range st.Layers {
		if c := s.caches[i]; c != nil {
			c.ensure(st.Pos)
			for p := c.kept(st.Pos); p < st.Pos; p++ {
				w := c.width
				c.put(p, l.K[p*w:(p+1)*w], l.V[p*w:(p+1)*w])
			}
		}
		if c := s.conv[i]; c != nil {
			copy(c.at(st.Pos), l.Conv)
		}
		if d := s.delta[i]; d != nil {
			copy(d.conv.at(st.Pos), l.Conv)
			copy(d.s.at(st.Pos), l.Delta)
		}
	}
	s.pos = st.Pos
	s.lo = st.Pos
	return nil
}

// ring keeps a layer's recurrent state (a conv window, a DeltaNet matrix)
// for the last len(ring) lengths: slot L % len(ring) is the state after L
// positions. A step reads its start's slot and writes the state after
// each of its last len(ring) tokens, so rewinding up to len(ring)-1
// positions is a move of the position, as it is for the KV caches.
type ring [][]float32

func newRing(slots, n int) ring {
	r := make(ring, slots)
	for i := range r {
		r[i] = make([]float32, n)
	}
	return r
}

func (r ring) at(L int) []float32 { return r[L%len(r)] }

func (r ring) reset() {
	for _, x := range r {
		clear(x)
	}
}

// live is the state after s.pos positions (zeros at position 0).
func (s *Session) live(r ring) []float32 {
	if s.pos == 0 {
		return make([]float32, len(r[0]))
	}
	return r.at(s.pos)
}

// recurrent reports whether any layer keeps recurrent state.
func (s *Session) recurrent() bool {
	for i := range s.conv {
		if s.conv[i] != nil || s.delta[i] != nil {
			return true
		}
	}
	return false
}

// reach is how many of the newest positions the session's past allows to
// rewind, or -1 for any number: recurrent states are kept for the last
// rewind depth positions; a KV ring of R rows over a window W keeps the
// window before an end up to R-W+1 positions back.
func (s *Session) reach() int {
	n := -1
	if s.recurrent() {
		n = s.slots - 1
	}
	for i, c := range s.caches {
		if c != nil && c.ring > 0 {
			r := c.ring - s.b.layers[i].attn.spec.Window + 1
			if n < 0 || r < n {
				n = r
			}
		}
	}
	return n
}

// consumed moves the position to end.
func (s *Session) consumed(end int) {
	s.pos = end
	if n := s.reach(); n >= 0 {
		s.lo = max(s.lo, end-n)
	}
}

var _ backend.Rewinder = (*Session)(nil)

// Rewindable is how many of the newest positions Rewind can drop now.
func (s *Session) Rewindable() int { return s.pos - s.lo }

// Rewind drops the newest n positions; see backend.Rewinder.
func (s *Session) Rewind(n int) error {
	if s.caches == nil {
		return fmt.Errorf("cpu: session is closed")
	}
	if n < 0 || n > s.Rewindable() {
		return fmt.Errorf("cpu: cannot rewind %d of %d positions (%d kept)", n, s.pos, s.Rewindable())
	}
	s.pos -= n
	return nil
}

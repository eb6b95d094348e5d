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
			if n > len(c.k) {
				return nil, fmt.Errorf("cpu: layer %d: KV cache holds %d of %d positions", i, len(c.k)/c.width, s.pos)
			}
			l.K = append([]float32(nil), c.k[:n]...)
			l.V = append([]float32(nil), c.v[:n]...)
		}
		if c := s.conv[i]; c != nil {
			l.Conv = append([]float32(nil), c...)
		}
		if d := s.delta[i]; d != nil {
			l.Conv = append([]float32(nil), d.conv...)
			l.Delta = append([]float32(nil), d.s...)
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
			conv[i] = len(c)
		}
		if d := s.delta[i]; d != nil {
			conv[i], delta[i] = len(d.conv), len(d.s)
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
			copy(c.k, l.K)
			copy(c.v, l.V)
		}
		if c := s.conv[i]; c != nil {
			copy(c, l.Conv)
		}
		if d := s.delta[i]; d != nil {
			copy(d.conv, l.Conv)
			copy(d.s, l.Delta)
		}
	}
	s.pos = st.Pos
	return nil
}

package engine

import "strings"

// StopMatcher holds back streamed text that could be the start of a stop
// string, so a stop string is never partly emitted.
type StopMatcher struct {
	stops   []string
	pending string
}

// NewStopMatcher matches the non-empty strings of stops.
func NewStopMatcher(stops []string) *StopMatcher {
	var s []string
	for _, x := range stops {
		if x != "" {
			s = append(s, x)
		}
	}
	return &StopMatcher{stops: s}
}

// Push adds text and returns what may be emitted now, and whether a stop
// string was found (the text before it is emitted, the rest dropped).
func (m *StopMatcher) Push(text string) (string, bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	m.pending += text
	for _, st := range m.stops {
		if i := strings.Index(m.pending, st); i >= 0 {
			out := m.pending[:i]
			m.pending = ""
			return out, true
		}
	}
	// Keep the longest suffix that is a prefix of some stop string.
	keep := 0
	for _, st := range m.stops {
		for k := min(len(st)-1, len(m.pending)); k > keep; k-- {
			if strings.HasSuffix(m.pending, st[:k]) {
				keep = k
				break
			}
		}
	}
	out := m.pending[:len(m.pending)-keep]
	m.pending = m.pending[len(m.pending)-keep:]
	return out, false
}

// Flush returns the held-back text (the generation ended without a stop).
func (m *StopMatcher) Flush() string {
	out := m.pending
	m.pending = ""
	return out
}

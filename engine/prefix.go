package engine

import (
	"sync"

	"github.com/cortiq/cortiq/backend"
)

// Prefix reuse: with Options.PrefixCacheBytes, a finished generation's
// session (its KV cache and recurrent state) is kept, and a later request
// whose prompt shares a prefix with what the session consumed (the next
// turn of a chat, a shared system prompt) continues from it: the session
// rewinds to the shared prefix (backend.Rewinder: a move of the position,
// no copy) and prefills only the new tokens. Sessions are taken out of the
// cache while they run, so concurrent requests (a server's slots) each
// have their own; the least recently used are closed past the byte
// budget.

type prefixCache struct {
	mu      sync.Mutex
	budget  int64
	bytes   int64
	entries []*session // least recently used first
}

// acquire returns a session for prompt and how many of its leading tokens
// the session already holds: a cached one sharing the longest prefix that
// it can rewind to, else a new one.
func (e *Engine) acquire(prompt []int, maxCtx int, want string) (*session, int, error) {
	c := e.prefix
	if c == nil {
		s, err := e.newSession(maxCtx, want)
		return s, 0, err
	}
	c.mu.Lock()
	best, bestN := -1, 0
	for i, s := range c.entries {
		if s.maxLen != maxCtx || (want == "cpu" && s.onDevice) {
			continue
		}
		n := commonPrefix(s.history, prompt)
		// The last prompt token is run again for its logits.
		n = min(n, len(prompt)-1)
		if n <= bestN || !s.canRewind(len(s.history)-n) {
			continue
		}
		best, bestN = i, n
	}
	var s *session
	if best >= 0 {
		s = c.entries[best]
		c.entries = append(c.entries[:best], c.entries[best+1:]...)
		c.bytes -= s.cacheBytes()
	}
	c.mu.Unlock()
	if s == nil {
		s, err := e.newSession(maxCtx, want)
		return s, 0, err
	}
	if err := s.rewind(len(s.history) - bestN); err != nil {
		s.Close()
		s, err := e.newSession(maxCtx, want)
		return s, 0, err
	}
	return s, bestN, nil
}

// release keeps s for later requests when the cache is on and s is sound
// (ok: its generation ended without error), else closes it.
func (e *Engine) release(s *session, ok bool) {
	c := e.prefix
	if s.ahead != nil {
		// A greedy batch submitted ahead of a stop: give it back.
		if p, isP := s.cur.(backend.GreedyStepper); !isP || p.DropGreedy(s.ahead) != nil {
			ok = false
		}
		s.ahead = nil
	}
	if c == nil || !ok || len(s.history) == 0 {
		s.Close()
		return
	}
	b := s.cacheBytes()
	c.mu.Lock()
	c.entries = append(c.entries, s)
	c.bytes += b
	var evict []*session
	for c.bytes > c.budget && len(c.entries) > 0 {
		old := c.entries[0]
		c.entries = c.entries[1:]
		c.bytes -= old.cacheBytes()
		evict = append(evict, old)
	}
	c.mu.Unlock()
	for _, old := range evict {
		old.Close()
	}
}

// closePrefix closes every cached session.
func (e *Engine) closePrefix() {
	c := e.prefix
	if c == nil {
		return
	}
	c.mu.Lock()
	entries := c.entries
	c.entries, c.bytes = nil, 0
	c.mu.Unlock()
	for _, s := range entries {
		s.Close()
	}
}

// canRewind reports whether the session can drop its newest n positions
// exactly without a replay.
func (s *session) canRewind(n int) bool {
	if n <= 0 {
		return true
	}
	r, ok := s.cur.(backend.Rewinder)
	return ok && r.Rewindable() >= n
}

// cacheBytes estimates the memory a cached session holds: what the
// session reports it holds (device and CPU sessions do), else its KV entries and its recurrent state
// (kept per step, RewindDepth+1 times).
func (s *session) cacheBytes() int64 {
	if r, ok := s.cur.(interface{ ResidentBytes() int64 }); ok {
		return r.ResidentBytes()
	}
	a := &s.e.Model.Arch
	var perPos, fixed int64
	for _, l := range a.Layers {
		if l.Attn != nil {
			perPos += 2 * 4 * int64(l.Attn.KVHeads*l.Attn.HeadDim)
		}
		if l.Conv != nil {
			fixed += 4 * int64((l.Conv.Kernel-1)*a.Hidden)
		}
		if d := l.Delta; d != nil {
			kd, vd := d.KeyHeads*d.KeyDim, d.ValueHeads*d.ValueDim
			fixed += 4 * int64((d.ConvKernel-1)*(2*kd+vd)+d.ValueHeads*d.KeyDim*d.ValueDim)
		}
	}
	depth := s.e.opts.RewindDepth
	if depth <= 0 {
		depth = backend.DefaultRewindDepth
	}
	return perPos*int64(len(s.history)) + fixed*int64(depth+1)
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

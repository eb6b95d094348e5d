package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/sample"
	"github.com/cortiq/cortiq/webgpu"
)

// autoDevice is what Backend "auto" tries first; the device backend itself
// declines software adapters and models it cannot hold.
const autoDevice = "webgpu"

// newDeviceBackend builds the device backend of this build; device_*.go
// files replace it.
var newDeviceBackend = func(m *model.Model, opts Options, host backend.Backend) (backend.Backend, error) {
	return nil, errors.New("engine: this build has no device backend")
}

// session runs on the device while it works and moves to the CPU, for
// good, the first time it fails: the CPU replays every position so far, so
// the sequence continues exactly as a pure CPU run would.
type session struct {
	e          *Engine
	maxLen     int
	cur        backend.Session
	onDevice   bool
	history    []int
	fallbacks  int
	failure    error // why the session left the device
	prefillErr error // why a CPU prefill's state did not reach the device (prefill.go)
	devStats   backend.Stats

	// ahead is a greedy batch submitted to continue from the last batch's
	// final pick (aheadFrom) before the host read that batch: the device
	// runs it while the host handles the tokens just read.
	ahead     *webgpu.GreedyBatch
	aheadFrom int
}

// newSession starts on the device unless want is "cpu" or there is none.
func (e *Engine) newSession(maxLen int, want string) (*session, error) {
	s := &session{e: e, maxLen: maxLen}
	if e.dev != nil && want != "cpu" {
		ds, err := e.dev.NewSession(maxLen)
		if err == nil {
			s.cur, s.onDevice = ds, true
			return s, nil
		}
		s.fallbacks++
	}
	c, err := e.cpuBackend()
	if err != nil {
		return nil, err
	}
	cs, err := c.NewSession(maxLen)
	if err != nil {
		return nil, err
	}
	s.cur = cs
	return s, nil
}

// Forward runs tokens and returns logits; see backend.Session.
func (s *session) Forward(tokens []int, all bool) ([]float32, error) {
	if len(s.history)+len(tokens) > s.maxLen {
		return nil, fmt.Errorf("engine: %d positions exceed the session's context of %d", len(s.history)+len(tokens), s.maxLen)
	}
	if err := s.dropAhead(); err != nil {
		return nil, err
	}
	pos0 := len(s.history) // of the first row of logits
	if !all {
		pos0 += len(tokens) - 1
	}
	out, err := s.cur.Forward(tokens, all)
	if err == nil {
		err = checkLogits(out, pos0, s.e.Model.Arch.Vocab)
	}
	if err == nil {
		s.history = append(s.history, tokens...)
		return out, nil
	}
	if !s.onDevice {
		return nil, err
	}
	// The CPU replays everything: if the model itself breaks (NaN weights,
	// say), the CPU's error names the first layer that produced a
	// non-finite value; if it does not, the device was wrong and the
	// sequence continues on the CPU.
	if err := s.toCPU(err); err != nil {
		return nil, err
	}
	out, err = s.cur.Forward(tokens, all)
	if err == nil {
		err = checkLogits(out, pos0, s.e.Model.Arch.Vocab)
	}
	if err != nil {
		return nil, err
	}
	s.history = append(s.history, tokens...)
	return out, nil
}

// dropAhead forgets a greedy batch submitted ahead that the coming call
// does not follow; one the device cannot drop exactly moves the session
// to the CPU.
func (s *session) dropAhead() error {
	if s.ahead == nil {
		return nil
	}
	if p, ok := s.cur.(greedyPipeliner); ok {
		if err := p.DropGreedy(s.ahead); err != nil {
			s.ahead = nil
			return s.toCPU(err)
		}
	}
	s.ahead = nil
	return nil
}

// VerifyGreedy consumes tokens in one batched step and returns the argmax
// of each position's logits (see backend.GreedyVerifier): on the device
// the argmax is taken there and only the ids come back; on the CPU, or
// after a device failure, from Forward's logits.
func (s *session) VerifyGreedy(tokens []int) ([]int, error) {
	if len(s.history)+len(tokens) > s.maxLen {
		return nil, fmt.Errorf("engine: %d positions exceed the session's context of %d", len(s.history)+len(tokens), s.maxLen)
	}
	if err := s.dropAhead(); err != nil {
		return nil, err
	}
	if v, ok := s.cur.(backend.GreedyVerifier); ok && s.onDevice {
		picks, err := v.VerifyGreedy(tokens)
		if err == nil && len(picks) == len(tokens) {
			s.history = append(s.history, tokens...)
			return picks, nil
		}
		if err == nil {
			err = fmt.Errorf("engine: device returned %d greedy ids for %d positions", len(picks), len(tokens))
		}
		// The CPU replays everything and verifies from its logits.
		if err := s.toCPU(err); err != nil {
			return nil, err
		}
	}
	logits, err := s.Forward(tokens, true)
	if err != nil {
		return nil, err
	}
	vocab := len(logits) / len(tokens)
	picks := make([]int, len(tokens))
	for i := range picks {
		picks[i] = sample.Argmax(logits[i*vocab : (i+1)*vocab])
	}
	return picks, nil
}

// checkLogits refuses logits holding a NaN or an infinity (pos0 is the
// position of the first row): sampling from them would pick token 0
// forever. The CPU backend names the layer that broke them itself (a
// *cpu.NonFiniteError); a device's logits are checked here, once per
// token, and the CPU replay then finds the layer.
func checkLogits(logits []float32, pos0, vocab int) error {
	for i, v := range logits {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return fmt.Errorf("engine: non-finite logit (%g) for token %d at position %d", v, i%vocab, pos0+i/max(vocab, 1))
		}
	}
	return nil
}

// toCPU moves the session to the CPU after a device failure (cause):
// nothing the device produced is used; the CPU replays every position.
func (s *session) toCPU(cause error) error {
	s.fallbacks++
	if sr, ok := s.e.dev.(backend.StatsReporter); ok {
		s.devStats = sr.Stats()
	}
	s.cur.Close()
	s.onDevice = false
	c, err := s.e.cpuBackend()
	if err != nil {
		return errors.Join(cause, err)
	}
	cs, err := c.NewSession(s.maxLen)
	if err != nil {
		return errors.Join(cause, err)
	}
	s.cur = cs
	s.failure = fmt.Errorf("device failed mid-generation, continued on the CPU: %w", cause)
	if len(s.history) > 0 {
		if _, err := cs.Forward(s.history, false); err != nil {
			return err
		}
	}
	return nil
}

// greedyStepper is implemented by device sessions that pick greedy tokens
// on the device, k per submit, when GreedyOnDevice says they can (a model
// split with host layers cannot).
type greedyStepper interface {
	ForwardGreedy(first, k int) ([]int, error)
	GreedyOnDevice() bool
}

// greedyPipeliner is implemented by device sessions that can submit a
// greedy batch before the host has read the previous one.
type greedyPipeliner interface {
	SubmitGreedy(first, k int) (*webgpu.GreedyBatch, error)
	CollectGreedy(g *webgpu.GreedyBatch) ([]int, error)
	DropGreedy(g *webgpu.GreedyBatch) error
}

// ForwardGreedy consumes first and then k-1 greedy picks, returning the k
// picks (the last is not consumed). On the device it is one submit; on the
// CPU, or after a device failure, k ordinary steps with the same argmax.
// next > 0 announces the following call (first = this call's last pick, k
// = next): a device that can submits it now, so it runs while the host
// handles these picks; a different following call just drops it.
func (s *session) ForwardGreedy(first, k, next int) ([]int, error) {
	if len(s.history)+k > s.maxLen {
		return nil, fmt.Errorf("engine: %d positions exceed the session's context of %d", len(s.history)+k, s.maxLen)
	}
	if len(s.history)+k+next > s.maxLen {
		next = 0
	}
	if g, ok := s.cur.(greedyStepper); ok && s.onDevice && g.GreedyOnDevice() {
		var ids []int
		var err error
		if p, ok := s.cur.(greedyPipeliner); ok {
			ids, err = s.pipelinedGreedy(p, first, k, next)
		} else {
			ids, err = g.ForwardGreedy(first, k)
		}
		if err == nil && len(ids) == k {
			s.history = append(s.history, first)
			s.history = append(s.history, ids[:k-1]...)
			return ids, nil
		}
		if err == nil {
			err = fmt.Errorf("engine: device returned %d greedy ids, want %d", len(ids), k)
		}
		s.ahead = nil
		if err := s.toCPU(err); err != nil {
			return nil, err
		}
	}
	ids := make([]int, 0, k)
	tok := first
	for range k {
		l, err := s.Forward([]int{tok}, false)
		if err != nil {
			return nil, err
		}
		tok = sample.Argmax(l)
		ids = append(ids, tok)
	}
	return ids, nil
}

// pipelinedGreedy runs the batch (first, k), from the batch submitted
// ahead when it is that batch, and submits (its last pick, next) before
// waiting for it.
func (s *session) pipelinedGreedy(p greedyPipeliner, first, k, next int) ([]int, error) {
	cur := s.ahead
	s.ahead = nil
	if cur != nil && (s.aheadFrom != first || cur.Steps() != k) {
		if err := p.DropGreedy(cur); err != nil {
			return nil, err
		}
		cur = nil
	}
	if cur == nil {
		var err error
		if cur, err = p.SubmitGreedy(first, k); err != nil {
			return nil, err
		}
	}
	if next > 0 {
		ahead, err := p.SubmitGreedy(-1, next)
		if err != nil {
			return nil, err
		}
		s.ahead = ahead
	}
	ids, err := p.CollectGreedy(cur)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		s.aheadFrom = ids[len(ids)-1]
	}
	return ids, nil
}

func (s *session) Close() error { return s.cur.Close() }

func (s *session) name() string {
	if s.onDevice {
		return s.e.dev.Name()
	}
	return "cpu"
}

func (s *session) stats() backend.Stats {
	if s.onDevice {
		if sr, ok := s.e.dev.(backend.StatsReporter); ok {
			return sr.Stats()
		}
	}
	return s.devStats
}

// counters returns the device's raw submit and token counts (zero on the CPU).
func (s *session) counters() (submits, tokens int64) {
	if s.onDevice {
		if sr, ok := s.e.dev.(backend.StatsReporter); ok {
			st := sr.Stats()
			return st.Submits, st.Tokens
		}
	}
	return 0, 0
}

// readback returns the device's bytes read back so far (zero on the CPU).
func (s *session) readback() int64 {
	if s.onDevice {
		if sr, ok := s.e.dev.(backend.StatsReporter); ok {
			return sr.Stats().ReadbackBytes
		}
	}
	return 0
}

func (s *session) uploadBytes() int64 {
	if s.onDevice {
		if sr, ok := s.e.dev.(backend.StatsReporter); ok {
			return sr.Stats().UploadBytes
		}
	}
	return 0
}

// newCUDABackend builds the native CUDA backend (device_cuda.go).
var newCUDABackend = func(m *model.Model, opts Options, host backend.Backend) (backend.Backend, error) {
	return nil, errors.New("engine: this build has no CUDA backend")
}

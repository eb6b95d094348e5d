package engine

import (
	"errors"
	"fmt"

	"github.com/cortiq/cortiq/backend"
)

// splitSession is the scheduler's one layer split, as ggml's backend
// scheduler splits a graph: a device session that holds only some of the
// model's layers (a backend.SplitSession, under a memory budget or an
// explicit layer list) runs the embedding, the head and its own layers;
// a CPU session (a backend.LayerRunner) runs the rest; the hidden state
// crosses between them at each boundary. Neither calls the other.
type splitSession struct {
	dev  backend.SplitSession
	cpu  backend.Session // also a backend.LayerRunner
	run  backend.LayerRunner
	on   []bool // per layer: on the device
	runs int64  // layer runs on the CPU, for Result.FallbackOps
}

// newSplit pairs a device session holding only some layers with a fresh
// session of the CPU backend c for the others; the caller keeps ds when
// it fails.
func newSplit(ds backend.SplitSession, c backend.Backend, maxLen int) (*splitSession, error) {
	cs, err := c.NewSession(maxLen)
	if err != nil {
		return nil, err
	}
	run, ok := cs.(backend.LayerRunner)
	if !ok {
		cs.Close()
		return nil, fmt.Errorf("engine: the %s backend cannot run a layer range", c.Name())
	}
	return &splitSession{dev: ds, cpu: cs, run: run, on: ds.Layers()}, nil
}

// partial reports whether a device session holds only some layers.
func partial(s backend.Session) (backend.SplitSession, bool) {
	ss, ok := s.(backend.SplitSession)
	if !ok {
		return nil, false
	}
	for _, on := range ss.Layers() {
		if !on {
			return ss, true
		}
	}
	return nil, false
}

// Forward runs tokens in steps of at most the device's step rows: per
// step the device embeds and runs its leading layers, each following run
// of layers goes to its side, and the device ends with the head.
func (s *splitSession) Forward(tokens []int, all bool) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, errors.New("engine: Forward with no tokens")
	}
	step := s.dev.StepRows(all)
	var out []float32
	for c0 := 0; c0 < len(tokens); c0 += step {
		chunk := tokens[c0:min(c0+step, len(tokens))]
		logits, err := s.step(chunk, all)
		if err != nil {
			return nil, err
		}
		if all {
			out = append(out, logits...)
		} else {
			out = logits
		}
	}
	return out, nil
}

// step runs one step of at most StepRows positions.
func (s *splitSession) step(tokens []int, all bool) ([]float32, error) {
	L := len(s.on)
	pos0 := s.dev.Len()
	i := 0
	for i < L && s.on[i] {
		i++
	}
	x, err := s.dev.EmbedLayers(tokens, i)
	if err != nil {
		return nil, err
	}
	n := len(tokens)
	for i < L {
		j := i
		for j < L && s.on[j] == s.on[i] {
			j++
		}
		if s.on[i] {
			if j == L {
				break // the device's last run ends with the head
			}
			err = s.dev.ForwardLayers(x, n, pos0, i, j)
		} else {
			err = s.run.ForwardLayers(x, n, pos0, i, j)
			s.runs += int64(j - i)
		}
		if err != nil {
			return nil, fmt.Errorf("engine: layers %d-%d: %w", i, j-1, err)
		}
		i = j
	}
	return s.dev.LayersHead(x, i, all)
}

func (s *splitSession) Len() int { return s.dev.Len() }

func (s *splitSession) Reset() {
	s.dev.Reset()
	s.cpu.Reset()
}

func (s *splitSession) Close() error {
	return errors.Join(s.dev.Close(), s.cpu.Close())
}

// Rewindable is what both sides can drop.
func (s *splitSession) Rewindable() int {
	d, ok1 := s.dev.(backend.Rewinder)
	c, ok2 := s.cpu.(backend.Rewinder)
	if !ok1 || !ok2 {
		return 0
	}
	return min(d.Rewindable(), c.Rewindable())
}

// Rewind drops the newest n positions on both sides.
func (s *splitSession) Rewind(n int) error {
	if n < 0 || n > s.Rewindable() {
		return fmt.Errorf("engine: cannot rewind %d of %d positions (%d kept)", n, s.Len(), s.Rewindable())
	}
	if err := s.dev.(backend.Rewinder).Rewind(n); err != nil {
		return err
	}
	return s.cpu.(backend.Rewinder).Rewind(n)
}

// ImportState hands the snapshot to the device session, which takes it
// only when it holds every layer: a split session replays instead.
func (s *splitSession) ImportState(st *backend.State) error {
	imp, ok := s.dev.(backend.StateImporter)
	if !ok {
		return errors.New("engine: the device session cannot import a state")
	}
	return imp.ImportState(st)
}

// ResidentBytes is the device memory the session holds.
func (s *splitSession) ResidentBytes() int64 {
	if r, ok := s.dev.(interface{ ResidentBytes() int64 }); ok {
		return r.ResidentBytes()
	}
	return 0
}

var (
	_ backend.Rewinder      = (*splitSession)(nil)
	_ backend.StateImporter = (*splitSession)(nil)
)

package webgpu

import (
	"errors"
	"fmt"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
)

// A session of a backend holding only some layers (Options.VRAMBudget,
// Options.Layers) is a backend.SplitSession: the scheduler (package
// engine) runs a step as EmbedLayers, the middle layers here
// (ForwardLayers) or on another backend, then LayersHead. Each of the
// three is one submit, as when this package ran the host's layers itself.

var _ backend.SplitSession = (*Session)(nil)

// Layers reports which decoder layers the session runs.
func (s *Session) Layers() []bool { return s.b.DeviceLayers() }

// StepRows is the most positions of one split step: a prefill chunk, or
// headChunk when every position's logits come back.
func (s *Session) StepRows(all bool) int {
	if all {
		return s.headChunk
	}
	return s.chunk
}

// checkStep refuses a split step the session cannot take.
func (s *Session) checkStep(n int, all bool, from, to int) error {
	if s.broken != nil {
		return fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	if len(s.inflight) > 0 {
		return errors.New("webgpu: split step while greedy batches are in flight")
	}
	if n <= 0 || n > s.StepRows(all) {
		return fmt.Errorf("webgpu: split step of %d positions, want 1..%d", n, s.StepRows(all))
	}
	if s.pos+n > s.maxLen {
		return fmt.Errorf("webgpu: %d positions exceed the session's %d", s.pos+n, s.maxLen)
	}
	if from < 0 || to > len(s.layerOps) || from > to {
		return fmt.Errorf("webgpu: layer range %d-%d of %d", from, to, len(s.layerOps))
	}
	for i := from; i < to; i++ {
		if s.layerOps[i] == nil {
			return fmt.Errorf("webgpu: %w: layer %d is not on the device", ErrUnsupported, i)
		}
	}
	return nil
}

// EmbedLayers starts a split step of tokens at Len(): the embedding, then
// layers [0, to), in one submit; it returns the hidden rows. See
// backend.SplitSession.
func (s *Session) EmbedLayers(tokens []int, to int) ([]float32, error) {
	n := len(tokens)
	if err := s.checkStep(n, false, 0, to); err != nil {
		return nil, err
	}
	a := s.b.arch
	for _, t := range tokens {
		if t < 0 || t >= a.Vocab {
			return nil, fmt.Errorf("webgpu: token %d outside the vocabulary (%d)", t, a.Vocab)
		}
	}
	s.greedyTail = false
	s.prepareGemm(n)
	d := s.b.dev
	if err := s.writeStep(s.pos, n, n-1, 1); err != nil {
		return nil, s.fail(err)
	}
	ids := make([]uint32, n)
	for i, t := range tokens {
		ids[i] = uint32(t)
	}
	if err := d.Write(s.tokens, 0, gpu.U32Bytes(ids)); err != nil {
		return nil, s.fail(err)
	}
	ds := []gpu.Dispatch{s.embed.dispatch(n, 1)}
	ds = s.encodeLayers(ds, 0, to, n, 1, s.pos+n)
	bytes := uint64(4 * n * a.Hidden)
	if err := d.Run(nil, ds, []gpu.Copy{{Src: s.x, Dst: s.stX, Size: bytes}}); err != nil {
		return nil, s.fail(err)
	}
	raw, err := d.Read(s.stX, bytes)
	if err != nil {
		return nil, s.fail(err)
	}
	s.b.count(1, 0, 0)
	return append([]float32(nil), gpu.BytesF32(raw)...), nil
}

// LayersHead ends a split step begun by EmbedLayers: layers [from, L) over
// the hidden rows x, then the head, in one submit. It returns the logits
// of the last row, or of every row with all, and moves Len past the step.
func (s *Session) LayersHead(x []float32, from int, all bool) ([]float32, error) {
	a := s.b.arch
	if len(x)%a.Hidden != 0 {
		return nil, fmt.Errorf("webgpu: %d floats are not rows of %d", len(x), a.Hidden)
	}
	n := len(x) / a.Hidden
	if err := s.checkStep(n, all, from, len(s.layerOps)); err != nil {
		return nil, err
	}
	d := s.b.dev
	headRow0, headRows := n-1, 1
	if all {
		headRow0, headRows = 0, n
	}
	if err := s.writeStep(s.pos, n, headRow0, headRows); err != nil {
		return nil, s.fail(err)
	}
	if err := d.Write(s.x, 0, gpu.F32Bytes(x)); err != nil {
		return nil, s.fail(err)
	}
	s.beginStep(n, all)
	defer s.endStep()
	ds := s.encodeLayers(nil, from, len(s.layerOps), n, headRows, s.pos+n)
	for _, o := range s.headOps {
		ds = append(ds, s.dispatchOp(o, n, headRows))
	}
	bytes := uint64(4 * headRows * a.Vocab)
	if err := d.Run(nil, ds, []gpu.Copy{{Src: s.logits, Dst: s.stLogits, Size: bytes}}); err != nil {
		return nil, s.fail(err)
	}
	logits, err := d.ReadF32(s.stLogits, headRows*a.Vocab)
	if err != nil {
		return nil, s.fail(err)
	}
	s.consumed(n)
	s.b.count(1, int64(n), 0)
	return logits, nil
}

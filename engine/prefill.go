package engine

import (
	"fmt"

	"github.com/cortiq/cortiq/backend"
)

// prefill consumes the prompt and returns the last position's logits. With
// Options.PrefillOnCPU and a device session, the CPU runs the prompt and
// its state moves to the device, which decodes from there; when the device
// session cannot import it, the device replays the prompt as usual. The
// logits returned are the CPU's (those the first pick is made from).
func (s *session) prefill(prompt []int) ([]float32, error) {
	if !s.e.opts.PrefillOnCPU || !s.onDevice {
		return s.Forward(prompt, false)
	}
	imp, ok := s.cur.(backend.StateImporter)
	if !ok || len(s.history) > 0 || len(prompt) > s.maxLen {
		return s.Forward(prompt, false)
	}
	logits, st, err := s.cpuPrefill(prompt)
	if err != nil {
		// The CPU is the fallback itself; a failure there is the request's.
		return nil, err
	}
	if err := imp.ImportState(st); err != nil {
		s.cur.Reset()
		s.prefillErr = fmt.Errorf("CPU prefill state not imported, device replayed the prompt: %w", err)
		return s.Forward(prompt, false)
	}
	s.history = append(s.history, prompt...)
	return logits, nil
}

// cpuPrefill runs prompt on a fresh CPU session and snapshots it.
func (s *session) cpuPrefill(prompt []int) ([]float32, *backend.State, error) {
	c, err := s.e.cpuBackend()
	if err != nil {
		return nil, nil, err
	}
	cs, err := c.NewSession(s.maxLen)
	if err != nil {
		return nil, nil, err
	}
	defer cs.Close()
	ex, ok := cs.(backend.StateExporter)
	if !ok {
		return nil, nil, fmt.Errorf("engine: the %s backend cannot export its state", c.Name())
	}
	logits, err := cs.Forward(prompt, false)
	if err != nil {
		return nil, nil, err
	}
	st, err := ex.ExportState()
	if err != nil {
		return nil, nil, err
	}
	return logits, st, nil
}

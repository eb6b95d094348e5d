package webgpu

import (
	"encoding/binary"
	"fmt"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/tensor"
)

// mixerState are the device buffers holding a hybrid layer's recurrent
// state: the conv window ([K-1, width], oldest first) and, for gated
// DeltaNet, the recurrent matrices ([vh, dk, dv]). Their layouts are
// backend.State's, so an import is a plain upload.
type mixerState struct {
	conv, delta *gpu.Buffer
}

func (s *Session) noteState(i int, st mixerState) {
	if s.states == nil {
		s.states = map[int]mixerState{}
	}
	s.states[i] = st
}

var _ backend.StateImporter = (*Session)(nil)

// ImportState uploads a snapshot (typically a CPU prefill) into the KV
// caches and recurrent buffers, so the next Forward continues at st.Pos.
// The kernels read the recurrent buffers whenever a step starts past
// position 0, so the imported state is what they continue from. A session
// with layers on the host refuses (ErrUnsupported): the caller replays.
func (s *Session) ImportState(st *backend.State) error {
	s.greedyTail = false
	if s.broken != nil {
		return fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	if !s.GreedyOnDevice() {
		return fmt.Errorf("webgpu: %w: state import with layers on the host", ErrUnsupported)
	}
	a := s.b.arch
	L := len(a.Layers)
	kv, conv, delta := make([]int, L), make([]int, L), make([]int, L)
	for i, dl := range s.b.layers {
		if dl == nil {
			return fmt.Errorf("webgpu: %w: layer %d is not on the device", ErrUnsupported, i)
		}
		if dl.at != nil {
			kv[i] = dl.kvw
		}
		switch {
		case dl.conv != nil:
			conv[i] = (dl.conv.spec.Kernel - 1) * a.Hidden
		case dl.delta != nil:
			sp := dl.delta.spec
			conv[i] = (sp.ConvKernel - 1) * dl.delta.cdim
			delta[i] = sp.ValueHeads * sp.KeyDim * sp.ValueDim
		}
	}
	if err := st.Check(kv, conv, delta); err != nil {
		return fmt.Errorf("webgpu: import: %w", err)
	}
	if st.Pos > s.maxLen {
		return fmt.Errorf("webgpu: import of %d positions into a session of %d", st.Pos, s.maxLen)
	}
	d := s.b.dev
	// The recurrent state goes into the slot of st.Pos; KV at offset 0.
	var off uint64
	write := func(buf *gpu.Buffer, data []float32) error {
		if len(data) == 0 {
			return nil
		}
		if buf == nil {
			return fmt.Errorf("webgpu: %w: no device buffer for the state", ErrUnsupported)
		}
		return d.Write(buf, off, gpu.F32Bytes(data))
	}
	writeKV := func(buf *gpu.Buffer, data []float32) error {
		if !s.b.opts.KVF16 {
			return write(buf, data)
		}
		out := make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(out[2*i:], tensor.F32ToF16(v))
		}
		return d.Write(buf, off, out)
	}
	for i, l := range st.Layers {
		off = 0
		if kv[i] > 0 {
			// A ring takes the positions it keeps, each at its row (in at
			// most two runs); one row per position otherwise.
			w, R := kv[i], s.kvLen[i]
			p0, p1 := 0, st.Pos
			if R > 0 {
				p0 = max(0, st.Pos-R)
			}
			for p0 < p1 {
				run := p1 - p0
				if R > 0 {
					run = min(run, R-p0%R)
				}
				row := p0
				if R > 0 {
					row = p0 % R
				}
				off = uint64(s.b.kvElem() * row * w)
				if err := writeKV(s.kc[i], l.K[p0*w:(p0+run)*w]); err != nil {
					return s.fail(fmt.Errorf("webgpu: import layer %d keys: %w", i, err))
				}
				if err := writeKV(s.vc[i], l.V[p0*w:(p0+run)*w]); err != nil {
					return s.fail(fmt.Errorf("webgpu: import layer %d values: %w", i, err))
				}
				p0 += run
			}
		}
		if conv[i] > 0 || delta[i] > 0 {
			ms := s.states[i]
			off = uint64(4 * (st.Pos % s.slots) * len(l.Conv))
			if err := write(ms.conv, l.Conv); err != nil {
				return s.fail(fmt.Errorf("webgpu: import layer %d conv window: %w", i, err))
			}
			off = uint64(4 * (st.Pos % s.slots) * len(l.Delta))
			if err := write(ms.delta, l.Delta); err != nil {
				return s.fail(fmt.Errorf("webgpu: import layer %d delta state: %w", i, err))
			}
		}
	}
	s.pos = st.Pos
	s.lo = st.Pos
	return nil
}

// The recurrent state of each hybrid layer is a ring of s.slots states on
// the device: slot L % slots holds the state after L positions. A step
// reads its start's slot and writes the states after each of its last
// s.slots tokens, so rewinding up to slots-1 positions is a move of the
// position, as it is for the KV caches; nothing is copied.

// recurrent reports whether any device layer keeps recurrent state.
func (s *Session) recurrent() bool { return len(s.states) > 0 }

// reach is how many of the newest positions the session's past allows to
// rewind, or -1 for any number: recurrent states are kept for the last
// rewind depth positions; a KV ring of R rows over a window W keeps the
// window before an end up to R-W+1 positions back.
func (s *Session) reach() int {
	n := -1
	if s.recurrent() {
		n = s.slots - 1
	}
	for i, R := range s.kvLen {
		if R > 0 {
			r := R - s.b.layers[i].at.Window + 1
			if n < 0 || r < n {
				n = r
			}
		}
	}
	return n
}

// consumed moves the position past n new positions.
func (s *Session) consumed(n int) {
	s.pos += n
	if n := s.reach(); n >= 0 {
		s.lo = max(s.lo, s.pos-n)
	}
}

var _ backend.Rewinder = (*Session)(nil)

// Rewindable is how many of the newest positions Rewind can drop now.
// Layers off the device are the scheduler's to rewind.
func (s *Session) Rewindable() int {
	return s.pos - s.lo
}

func (s *Session) rewindable(n int) error {
	if n < 0 || n > s.Rewindable() {
		return fmt.Errorf("webgpu: cannot rewind %d of %d positions (%d kept)", n, s.pos, s.Rewindable())
	}
	return nil
}

// Rewind drops the newest n positions; see backend.Rewinder. Layers off
// the device are rewound by the scheduler, with the session running them.
func (s *Session) Rewind(n int) error {
	if s.broken != nil {
		return fmt.Errorf("webgpu: session unusable after an earlier error: %w", s.broken)
	}
	if len(s.inflight) > 0 {
		return fmt.Errorf("webgpu: rewind while greedy batches are in flight")
	}
	if err := s.rewindable(n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	s.pos -= n
	s.greedyTail = false
	return nil
}

// ResidentBytes is the device memory the session holds (KV caches,
// recurrent state, activations): what keeping it costs.
func (s *Session) ResidentBytes() int64 { return s.resid }

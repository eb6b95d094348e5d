package backend

import "fmt"

// State is a snapshot of a session after Pos positions: everything a
// session of another backend needs to continue the sequence at Pos as if it
// had consumed those positions itself. Every layout is the CPU backend's
// natural one, row-major f32:
//
//   - K, V (attention layers): [Pos, kvHeads*headDim]; K is stored after its
//     biases, q/k norm and rotary embedding, exactly as attention reads it.
//   - Conv (short-conv layers): the last Kernel-1 gated inputs B⊙x,
//     [Kernel-1, hidden], oldest first (zeros before the first token).
//     Gated-DeltaNet layers: the last ConvKernel-1 conv inputs,
//     [ConvKernel-1, 2*keyHeads*keyDim + valueHeads*valueDim], channels
//     ordered [q | k | v], oldest first.
//   - Delta (gated-DeltaNet layers): the recurrent state
//     [valueHeads, keyDim, valueDim].
//
// A field a layer does not have is nil.
type State struct {
	Pos    int
	Layers []LayerState
}

// LayerState is one decoder layer's part of a State.
type LayerState struct {
	K, V  []float32
	Conv  []float32
	Delta []float32
}

// StateExporter is implemented by sessions that can snapshot their state.
type StateExporter interface {
	ExportState() (*State, error)
}

// StateImporter is implemented by sessions that can continue from a
// snapshot. ImportState replaces the session's whole state; on error the
// session's state is undefined (the caller resets or discards it).
type StateImporter interface {
	ImportState(*State) error
}

// Check reports whether st is well formed for layers with the given widths:
// kv[i] is layer i's kvHeads*headDim (0 for no attention), conv[i] and
// delta[i] the lengths of its conv window and recurrent state (0 for none).
func (st *State) Check(kv, conv, delta []int) error {
	if st == nil {
		return fmt.Errorf("backend: nil state")
	}
	if st.Pos < 0 {
		return fmt.Errorf("backend: state at position %d", st.Pos)
	}
	if len(st.Layers) != len(kv) || len(kv) != len(conv) || len(kv) != len(delta) {
		return fmt.Errorf("backend: state of %d layers for a model of %d", len(st.Layers), len(kv))
	}
	for i, l := range st.Layers {
		if len(l.K) != st.Pos*kv[i] || len(l.V) != st.Pos*kv[i] {
			return fmt.Errorf("backend: state layer %d: K/V of %d/%d floats, want %d positions × %d", i, len(l.K), len(l.V), st.Pos, kv[i])
		}
		if len(l.Conv) != conv[i] {
			return fmt.Errorf("backend: state layer %d: conv window of %d floats, want %d", i, len(l.Conv), conv[i])
		}
		if len(l.Delta) != delta[i] {
			return fmt.Errorf("backend: state layer %d: delta state of %d floats, want %d", i, len(l.Delta), delta[i])
		}
	}
	return nil
}

// Memory is what one session of a given context holds on a backend, in
// bytes: its KV caches (sliding-window rings included), its recurrent
// states (kept per step for rewinds) and its activations (the buffers of
// one step).
type Memory struct {
	KV          int64 `json:"kv_bytes"`
	State       int64 `json:"state_bytes"`
	Activations int64 `json:"activation_bytes"`
}

// Total is the sum of the parts.
func (m Memory) Total() int64 { return m.KV + m.State + m.Activations }

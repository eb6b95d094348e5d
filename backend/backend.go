// Package backend states the contract between the engine and the devices
// that run a model's forward pass (cpu, webgpu, …). The engine is the
// scheduler: it opens a Backend by name from the registry (Register, Open,
// in the style of database/sql: each backend package registers itself
// under its build constraints), falls back to the CPU one when a device
// backend refuses or fails, replaying the sequence so no half-computed
// result is ever returned, and splits a model that does not fit a device
// between it and the CPU. No backend calls another.
//
// Optional capabilities are small interfaces a session may implement:
// StateExporter/StateImporter (hand a sequence to another backend),
// Rewinder (drop the newest positions exactly: speculative decoding's
// rejected drafts, a new prompt sharing a kept prefix), GreedyVerifier and
// GreedyStepper (greedy picks where the logits are), LayerRunner (run a
// layer range of a split model), StatsReporter.
package backend

// Backend runs the forward pass of one loaded model on one kind of device.
type Backend interface {
	// Name is "cpu" or "webgpu:<adapter>".
	Name() string
	// NewSession allocates the per-sequence state (KV cache, recurrent
	// state) for at most maxLen positions.
	NewSession(maxLen int) (Session, error)
	Close() error
}

// Session is the state of one sequence.
type Session interface {
	// Forward consumes tokens at positions Len() .. Len()+len(tokens)-1.
	// It returns the logits of the last position ([vocab]), or of every
	// consumed position ([len(tokens)*vocab], row-major) when all is true.
	// On error the session's state is undefined: the caller discards it.
	Forward(tokens []int, all bool) ([]float32, error)
	// Len is the number of positions consumed so far.
	Len() int
	// Reset forgets all positions (the allocation is kept).
	Reset()
	Close() error
}

// Stats are counters a backend may expose (all optional).
type Stats struct {
	FallbackOps      int     `json:"fallback_ops"`
	SubmitsPerToken  float64 `json:"submits_per_token"`
	UploadBytes      int64   `json:"upload_bytes"`
	ResidentBytes    int64   `json:"resident_bytes"`
	WeightBytesToken int64   `json:"weight_bytes_per_token"`
	// Submits and Tokens are the raw counts behind SubmitsPerToken, so a
	// caller can measure a window (steady decode) by difference.
	Submits int64 `json:"submits"`
	Tokens  int64 `json:"tokens"`
	// ReadbackBytes are the bytes read back from the device (logits, ids,
	// hidden states for host layers), for the whole device.
	ReadbackBytes int64 `json:"readback_bytes"`
}

// StatsReporter is implemented by backends that count what they do.
type StatsReporter interface {
	Stats() Stats
}

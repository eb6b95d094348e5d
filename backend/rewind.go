package backend

// DefaultRewindDepth is the number of per-step recurrent states (short-conv
// windows, DeltaNet matrices) a session keeps when its backend's options
// leave the depth at zero: Rewind can drop up to that many of the newest
// positions of a model with recurrent layers or sliding-window layers kept
// in a KV ring (window + depth positions). Models whose every layer keeps
// full-length KV rewind any number (their entries are indexed by position).
const DefaultRewindDepth = 4

// Rewinder is implemented by sessions that can drop their newest positions
// exactly: after Rewind(n) the session continues as if it had consumed only
// its first Len()-n positions (the KV entries past them are overwritten by
// later steps; every recurrent state is the one kept for Len()-n). It costs
// no copy of a KV cache: a session with recurrent layers keeps the state
// after each of its last few steps (its rewind depth) as it computes them.
type Rewinder interface {
	// Rewindable is how many of the newest positions Rewind can drop now:
	// Len() when every layer keeps full-length KV; with recurrent layers,
	// at most the session's rewind depth; with sliding-window KV rings,
	// what the rings keep (at least the depth); less what was rewound
	// since.
	Rewindable() int
	// Rewind drops the newest n positions. It fails, changing nothing,
	// when n is negative or more than Rewindable().
	Rewind(n int) error
}

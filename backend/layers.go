package backend

// LayerRunner is implemented by sessions that can run a range of decoder
// layers on hidden states handed to them: the scheduler (package engine)
// splits a model that does not fit one device across two backends, the
// device running some layers and the CPU the rest, the hidden state
// crossing at each boundary. No backend calls another: the scheduler
// moves x between them.
type LayerRunner interface {
	// ForwardLayers runs decoder layers [from, to) over n hidden rows x
	// (n*hidden floats, updated in place) at positions pos0..pos0+n-1,
	// keeping the session's own caches for those layers. For each layer
	// the calls come in position order. Len becomes max(Len, pos0+n).
	ForwardLayers(x []float32, n, pos0, from, to int) error
}

// SplitSession is implemented by sessions of a backend that holds only
// some of a model's decoder layers (a device under a memory budget or an
// explicit layer list). It runs a step's ends (the embedding, the head)
// and its own layers; the scheduler runs the others on a LayerRunner of
// another backend. One step of n positions (n at most StepRows(all)) is
// EmbedLayers, then for each run of layers either the other runner's
// ForwardLayers or this session's, then LayersHead.
type SplitSession interface {
	Session
	LayerRunner
	// Layers reports, per decoder layer, whether this session runs it.
	Layers() []bool
	// StepRows is the most positions one step may hold: all is true when
	// the step returns every position's logits.
	StepRows(all bool) int
	// EmbedLayers starts a step of tokens at position Len(): their
	// embeddings, then this session's layers [0, to), returning the hidden
	// rows ([len(tokens)*hidden]). It does not move Len.
	EmbedLayers(tokens []int, to int) ([]float32, error)
	// LayersHead ends the step begun by EmbedLayers: this session's layers
	// [from, layers) over x, then the head. It returns the logits of the
	// last row, or of every row with all, and moves Len past the step.
	LayersHead(x []float32, from int, all bool) ([]float32, error)
}

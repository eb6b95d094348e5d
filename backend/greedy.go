package backend

// Pending is a batch of greedy steps a GreedyStepper submitted and whose
// picks have not been collected yet. Only the session that made it reads
// what is inside.
type Pending interface {
	// Steps is the number of greedy steps in the batch.
	Steps() int
}

// GreedyStepper is implemented by sessions that pick greedy tokens where
// the logits are (on a device: the argmax feeds the next step's embedding
// and only the ids come back), k steps per submit, and that can submit a
// batch before the host read the one before it.
type GreedyStepper interface {
	// GreedyOnDevice reports whether greedy batches can run now (a session
	// whose model is split across backends cannot).
	GreedyOnDevice() bool
	// SubmitGreedy consumes first and then k-1 greedy picks, submitting
	// the k steps without waiting for them. first < 0 continues from the
	// last pick of the batch before (which the host may not have read).
	SubmitGreedy(first, k int) (Pending, error)
	// CollectGreedy waits for a batch and returns its k picks (the last is
	// not consumed). Batches are collected in the order of submission.
	CollectGreedy(Pending) ([]int, error)
	// DropGreedy forgets the newest batch, uncollected, giving its
	// positions back exactly (as Rewinder.Rewind does); it fails when the
	// session cannot.
	DropGreedy(Pending) error
}

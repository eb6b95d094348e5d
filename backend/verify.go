package backend

// GreedyVerifier is implemented by sessions that verify greedy drafts
// where the logits are: speculative decoding's target consumes the last
// emitted token and the drafts in one batched step and needs only each
// position's argmax, not a vocabulary of logits per position.
type GreedyVerifier interface {
	// VerifyGreedy consumes tokens, as Forward(tokens, true) does, and
	// returns the argmax of every position's logits ([len(tokens)], the
	// lowest index among equal maxima): picks[i] is the greedy token
	// after tokens[:i+1]. Logits holding a NaN or an infinity are an
	// error. On error the session's state is undefined, as for Forward.
	VerifyGreedy(tokens []int) (picks []int, err error)
}

// VerifyPreparer is implemented by sessions that build kernels for
// batched steps of a few tokens on first use: PrepareVerify(n) builds
// those of steps up to n tokens now, so that speculative decoding's first
// verify steps (k+1 tokens) do not pay for compiling them. It is a hint;
// an error leaves the kernels to be built on first use.
type VerifyPreparer interface {
	PrepareVerify(n int) error
}

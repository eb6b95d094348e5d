package cpu

import "github.com/cortiq/cortiq/backend"

var _ backend.GreedyVerifier = (*Session)(nil)

// VerifyGreedy consumes tokens in one batched pass and returns the argmax
// of each position's logits (the lowest index on ties); see
// backend.GreedyVerifier. Non-finite logits are Forward's error.
func (s *Session) VerifyGreedy(tokens []int) ([]int, error) {
	logits, err := s.Forward(tokens, true)
	if err != nil {
		return nil, err
	}
	vocab := len(logits) / len(tokens)
	picks := make([]int, len(tokens))
	for r := range picks {
		row := logits[r*vocab : (r+1)*vocab]
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		picks[r] = best
	}
	return picks, nil
}

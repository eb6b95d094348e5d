package quant

import (
	"fmt"
	"math"
	"sync"

	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// Calibrate runs tokens through m on the CPU engine in windows of at most
// window tokens (each a fresh sequence) and returns, per weight name, the
// Gram matrix of the inputs of every product with that weight. Weights used
// by a product under a name Calibrate cannot see (a nameless tensor) are
// left out. The CPU kernels' observer is process-wide: do not run other CPU
// inference while Calibrate runs.
func Calibrate(m *model.Model, tokens []int, window int) (map[string]*Gram, error) {
	if window <= 0 {
		return nil, fmt.Errorf("quant: calibrate: window %d", window)
	}
	b, err := cpu.New(m, cpu.Options{})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	grams := map[string]*Gram{}
	bad := map[string]bool{} // names seen with two widths (views of one tensor)
	var mu sync.Mutex
	prev := kernel.SetObserver(func(w *tensor.Tensor, x []float32, n int) {
		if w.Name == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		g := grams[w.Name]
		if g == nil {
			g = NewGram(w.Cols())
			grams[w.Name] = g
		}
		if g.Cols != w.Cols() {
			bad[w.Name] = true
			return
		}
		g.Add(x, n)
	})
	defer kernel.SetObserver(prev)
	for i := 0; i < len(tokens); i += window {
		s, err := b.NewSession(window)
		if err != nil {
			return nil, err
		}
		// all: the output head sees every position, not only the last.
		_, err = s.Forward(tokens[i:min(len(tokens), i+window)], true)
		s.Close()
		if err != nil {
			return nil, err
		}
	}
	for name := range bad {
		delete(grams, name)
	}
	return grams, nil
}

// Quantizer returns the tensor re-encoder GPTQ gives for codec c: for a
// weight with calibration statistics (a matrix whose name Calibrate saw,
// rows of whole blocks), the GPTQ encoding; otherwise ok is false and the
// caller rounds to nearest. Token embeddings are never taken (a lookup, not
// a product over calibrated inputs), even when tied to the output head.
func Quantizer(grams map[string]*Gram, c tensor.Codec, opts Options) func(t *tensor.Tensor) (out *tensor.Tensor, ok bool, err error) {
	return func(t *tensor.Tensor) (*tensor.Tensor, bool, error) {
		g := grams[t.Name]
		if g == nil || len(t.Shape) != 2 || t.Cols() != g.Cols || t.Cols()%c.BlockLen() != 0 || !tensor.CanSetElem(c) || isEmbedding(t.Name) {
			return nil, false, nil
		}
		w := make([]float32, t.Elements())
		if err := tensor.DequantizeTensor(w, t); err != nil {
			return nil, false, err
		}
		data, err := GPTQ(w, t.Rows(), t.Cols(), g, c, opts)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", t.Name, err)
		}
		return &tensor.Tensor{Name: t.Name, Codec: c, Shape: append([]int(nil), t.Shape...), Data: data}, true, nil
	}
}

func isEmbedding(name string) bool {
	return name == "token_embd.weight" || name == "model.embed_tokens.weight" || name == "tok_embeddings.weight"
}

// KL is the mean, over every position of tokens (run in windows of at most
// window tokens, each a fresh sequence), of KL(P_ref ‖ P_q) between the
// next-token distributions of ref and q on the CPU engine, in nats.
func KL(ref, q *model.Model, tokens []int, window int) (float64, error) {
	lr, err := allLogits(ref, tokens, window)
	if err != nil {
		return 0, err
	}
	lq, err := allLogits(q, tokens, window)
	if err != nil {
		return 0, err
	}
	if len(lr) != len(lq) || len(tokens) == 0 {
		return 0, fmt.Errorf("quant: kl: %d vs %d logits", len(lr), len(lq))
	}
	v := len(lr) / len(tokens)
	var sum float64
	for t := range tokens {
		sum += klRow(lr[t*v:(t+1)*v], lq[t*v:(t+1)*v])
	}
	return sum / float64(len(tokens)), nil
}

func allLogits(m *model.Model, tokens []int, window int) ([]float32, error) {
	b, err := cpu.New(m, cpu.Options{})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var out []float32
	for i := 0; i < len(tokens); i += window {
		s, err := b.NewSession(window)
		if err != nil {
			return nil, err
		}
		l, err := s.Forward(tokens[i:min(len(tokens), i+window)], true)
		s.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	ls := m + math.Log(s)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - ls
	}
	return out
}

func klRow(p, q []float32) float64 {
	lp, lq := logSoftmax(p), logSoftmax(q)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return math.Max(kl, 0)
}

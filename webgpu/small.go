package webgpu

import (
	"fmt"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

// Small steps: speculative decoding verifies the last token and k drafts,
// a step of k+1 tokens (2..maxSmallTokens) whose every row's logits (or
// argmax) come back, and that must cost about one decode step. The prefill kernels serve it badly: the token-blocked matmul
// (Tuning.GemmTB tokens a workgroup) reads each weight ceil(n/GemmTB)
// times with eight rows of registers a thread, the pre-norms and the
// gate/up activation run as dispatches of their own, and attention gives
// each (head, token) one workgroup over the whole span.
//
// A small step runs the one-token graph instead, n columns wide:
//
//   - every dense projection is the batched matvec matmul.wgsl with a token
//     block of exactly n (MatmulRows(c, n, r)): each weight row is read once
//     for all n columns, and the one-token variant's bind group is reused,
//     so the pre-norm stays fused into q/k/v and gate/up (MatmulRowsNorm)
//     and SiLU·up stays in gate/up's epilogue (mode 2); the norm and act
//     dispatches are left out, as for one token;
//   - attention takes the one-token split-K geometry (parts of
//     decSplitLen positions) for all n rows, which splits each row's span
//     exactly as a decode step at that position does.
//
// The per-output sums are those of the decode matvec (same chunk order,
// same two-level reduction); only a fused norm's sum of squares is taken
// in another order. Routed experts and the recurrent mixers' own kernels
// run as in any multi-token step.

// maxSmallTokens is the longest small step: matmul.wgsl's largest token
// block.
const maxSmallTokens = 16

// smallMM is a dense projection's batched-matvec kernels for small steps,
// by step length.
type smallMM struct {
	codec tensor.Codec
	rows  int
	norm  bool // the op's one-token variant multiplies by RMSNorm(x)
	pipes [maxSmallTokens + 1]*gpu.Pipeline
	rpw   [maxSmallTokens + 1]int // rows per workgroup
}

// smallRows is the output rows a workgroup of the batched matvec computes
// for tb tokens: Tuning.SmallRows, else 4 (the decode matvec's rows a
// thread), else 2; even (interleaved gate/up rows), within matmul.wgsl's
// 48 outputs and the device's workgroup memory (288 bytes per sum). 0 when
// none fits.
func (b *Backend) smallRows(tb int, norm bool) int {
	limit := int(b.dev.Limits().MaxComputeWorkgroupStorageSize)
	fits := func(r int) bool {
		nn := r * tb
		if norm {
			nn += tb
		}
		return r*tb <= 48 && 288*nn <= limit
	}
	if r := b.tune.SmallRows; r > 0 {
		if fits(r) {
			return r
		}
		return 0
	}
	for _, r := range []int{4, 2} {
		if fits(r) {
			return r
		}
	}
	return 0
}

// matmulNormTBPipe is MatmulRowsNorm for tb tokens and r rows.
func (b *Backend) matmulNormTBPipe(c tensor.Codec, tb, r int) (*gpu.Pipeline, error) {
	return b.dev.PipelineOf(fmt.Sprintf("matmul-norm/%s/tb%d/r%d", c, tb, r), func() (string, error) { return shaders.MatmulRowsNorm(c, tb, r) }, kinds(shaders.KMatmulNorm))
}

// build makes the kernel for steps of n tokens.
func (m *smallMM) build(b *Backend, n int) error {
	if m.pipes[n] != nil {
		return nil
	}
	r := b.smallRows(n, m.norm)
	if r == 0 {
		return fmt.Errorf("webgpu: no batched matvec of %d tokens fits the device's workgroup memory", n)
	}
	var p *gpu.Pipeline
	var err error
	if m.norm {
		p, err = b.matmulNormTBPipe(m.codec, n, r)
	} else {
		p, err = b.matmulPipe(m.codec, n, r)
	}
	if err != nil {
		return err
	}
	m.pipes[n], m.rpw[n] = p, r
	return nil
}

// smallMax is the longest step the session runs as a small step (1: none).
func (s *Session) smallMax() int {
	if s.b.tune.SmallSteps == "off" {
		return 1
	}
	return min(maxSmallTokens, s.chunk)
}

// prepareSmall builds the batched matvecs for steps of n tokens, once; a
// length whose kernels do not build runs the prefill kernels (correct,
// only slower).
func (s *Session) prepareSmall(n int) {
	if n < 2 || n > s.smallMax() || s.smallTried[n] {
		return
	}
	s.smallTried[n] = true
	ok := true
	each := func(ops []*op) {
		for _, o := range ops {
			if o.small != nil && ok {
				ok = o.small.build(s.b, n) == nil
			}
		}
	}
	for _, ops := range s.layerOps {
		each(ops)
	}
	each(s.headOps)
	s.smallOK[n] = ok
}

// beginStep starts encoding a step of n tokens: one that returns every
// row's logits (all: verification) runs as a small step when it is short
// enough and its kernels build. Other steps (a prompt, a split model's
// layers) keep the kernels built with the session: a short prompt would
// otherwise compile small-step kernels on first use, before its first
// token.
func (s *Session) beginStep(n int, all bool) {
	s.smallNow = false
	if all {
		s.prepareSmall(n)
		s.smallNow = true
	}
}

// endStep ends the step beginStep started.
func (s *Session) endStep() { s.smallNow = false }

// small reports whether the step being encoded, of n tokens (or n head
// rows), runs as a small step.
func (s *Session) small(n int) bool {
	return s.smallNow && n >= 2 && n <= maxSmallTokens && s.smallOK[n]
}

// PrepareVerify builds the kernels of small steps of 2..n tokens now, so
// that a speculative generation does not compile them in its first
// verify steps (the kernels are built on first use otherwise).
func (s *Session) PrepareVerify(n int) error {
	for k := 2; k <= min(n, s.smallMax()); k++ {
		s.prepareSmall(k)
	}
	return nil
}

// dispatchOp is op o's launch in a step of ntok tokens whose head covers
// headRows rows: the batched matvec for a dense projection in a small
// step, else o.dispatch.
func (s *Session) dispatchOp(o *op, ntok, headRows int) gpu.Dispatch {
	n := ntok
	if o.rows == rowsHead {
		n = headRows
	}
	if o.small != nil && s.small(n) && o.small.pipes[n] != nil {
		x, y := matmulGrid(o.small.rows, o.small.rpw[n])
		return gpu.Dispatch{P: o.small.pipes[n], G: o.g, X: x, Y: y, Z: 1, Label: o.label}
	}
	return o.dispatch(ntok, headRows)
}

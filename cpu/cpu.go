// Package cpu is the float32 reference forward pass: every architecture
// model.Arch describes, computed plainly on the CPU (parallel over cores
// through package kernel). It is the engine's universal fallback and the
// numerical reference the device backends are compared against; its logits
// match Hugging Face transformers (float32, eager attention) to ~1e-5.
//
// A Backend holds a model's prepared weights (projections stay in their
// codec and are decoded on the fly by the kernels; norms and biases are
// decoded to float32 once). A Session holds one sequence's KV cache.
//
// The layer loop dispatches on the layer's mixer and FFN kind; a mixer this
// package does not implement is refused by New, never approximated.
package cpu

import (
	"fmt"
	"runtime"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// Options tunes the CPU backend. The zero value is the reference behaviour.
type Options struct {
	// RewindDepth is the number of per-step recurrent states a session of
	// a model with short-conv or DeltaNet layers keeps, so Rewind can drop
	// that many of its newest positions (0 = backend.DefaultRewindDepth).
	RewindDepth int
	// FullKV keeps every position of sliding-window layers (one KV row per
	// position, as for global layers) instead of a ring of the window plus
	// the rewind depth: the layout before rings, for comparisons.
	FullKV bool
	// KVF16 keeps the KV caches in half precision (IEEE binary16, round
	// to nearest even): half the memory, keys and values rounded to 11
	// significant bits (logits move by ~1e-3..1e-2 on the fixtures, so
	// the f32 reference stays the default).
	KVF16 bool
}

// Backend runs a model on the CPU. It is safe to use from several sessions
// at once.
type Backend struct {
	m       *model.Model
	arch    *model.Arch
	opts    Options
	embd    *tensor.Tensor
	output  *tensor.Tensor // token_embd when the embeddings are tied
	outNorm []float32
	layers  []*layer
	weights []*tensor.Tensor // every weight tensor, for ReleasePacked
}

// ReleasePacked drops the int8 tiles the kernels built for this model's
// weights (kernel.Unpack); they are rebuilt if the CPU runs the model
// again. The engine calls it when a device takes the model over after
// the CPU was timed against it.
func (b *Backend) ReleasePacked() {
	for _, t := range b.weights {
		kernel.Unpack(t)
	}
	// The tiles live outside the Go heap (mapped for huge pages), where
	// the collector's pacing does not see them: collect now, so that
	// their memory goes back to the system now.
	runtime.GC()
}

// layer holds one decoder layer's weights, ready for the forward pass.
type layer struct {
	spec *model.Layer

	attnNorm, postAttnNorm, ffnNorm, postFFNNorm []float32

	attn  *attnWeights
	conv  *convWeights
	delta *deltaWeights
	ffn   *ffnWeights
	moe   *moeWeights
}

type attnWeights struct {
	spec           *model.Attention
	q, k, v, o     *tensor.Tensor
	qb, kb, vb, ob []float32 // nil when absent
	qNorm, kNorm   []float32 // nil when absent
	sinks          []float32 // [heads] attention sinks, nil when absent
	rope           *model.RopeTable
}

type ffnWeights struct {
	gate, up, down *tensor.Tensor
}

// New prepares a model for the CPU. It refuses layer kinds this package does
// not compute.
func New(m *model.Model, opts Options) (*Backend, error) {
	a := &m.Arch
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	switch a.Act {
	case model.ActSiLU, model.ActGELUTanh:
	case model.ActSwiGLUOAI:
		if !(a.SwiGLULimit > 0) || a.SwiGLUAlpha == 0 {
			return nil, fmt.Errorf("cpu: %s activation needs a positive limit and an alpha (have %v, %v)", a.Act, a.SwiGLULimit, a.SwiGLUAlpha)
		}
	default:
		return nil, fmt.Errorf("cpu: activation %q not supported", a.Act)
	}
	switch a.Norm {
	case model.NormRMS, model.NormRMSPlusOne:
	default:
		return nil, fmt.Errorf("cpu: norm %q not supported", a.Norm)
	}
	b := &Backend{m: m, arch: a, opts: opts}
	w := weightGetter{w: m.Weights, seen: &b.weights}
	b.embd = w.matrix(model.TokenEmbd, a.Vocab, a.Hidden)
	if a.TiedEmbeddings {
		b.output = b.embd
	} else {
		b.output = w.matrix(model.Output, a.Vocab, a.Hidden)
	}
	b.outNorm = w.vector(model.OutputNorm, a.Hidden)
	for i := range a.Layers {
		spec := &a.Layers[i]
		l := &layer{spec: spec}
		name := func(s string) string { return model.LayerTensor(i, s) }
		if spec.PreMixerNorm {
			l.attnNorm = w.vector(name(model.AttnNorm), a.Hidden)
		}
		if spec.PostMixerNorm {
			l.postAttnNorm = w.vector(name(model.PostAttnNorm), a.Hidden)
		}
		if spec.PreFFNNorm {
			l.ffnNorm = w.vector(name(model.FFNNorm), a.Hidden)
		}
		if spec.PostFFNNorm {
			l.postFFNNorm = w.vector(name(model.PostFFNNorm), a.Hidden)
		}
		switch spec.Mixer {
		case model.MixerAttention:
			l.attn = loadAttention(&w, i, spec.Attn, a.Hidden)
		case model.MixerShortConv:
			l.conv = loadShortConv(&w, i, spec.Conv, a.Hidden)
		case model.MixerGatedDelta:
			l.delta = loadGatedDelta(&w, i, spec.Delta, a.Hidden)
		default:
			return nil, fmt.Errorf("cpu: layer %d: %s mixer not supported yet", i, spec.Mixer)
		}
		switch spec.FFN {
		case model.FFNDense:
			l.ffn = &ffnWeights{
				gate: w.matrix(name(model.FFNGate), spec.FFNHidden, a.Hidden),
				up:   w.matrix(name(model.FFNUp), spec.FFNHidden, a.Hidden),
				down: w.matrix(name(model.FFNDown), a.Hidden, spec.FFNHidden),
			}
		case model.FFNMoE:
			l.moe = loadMoE(&w, i, spec.MoE, a.Hidden)
		default:
			return nil, fmt.Errorf("cpu: layer %d: %s FFN not supported yet", i, spec.FFN)
		}
		if w.err != nil {
			return nil, w.err
		}
		b.layers = append(b.layers, l)
	}
	if w.err != nil {
		return nil, w.err
	}
	return b, nil
}

func loadAttention(w *weightGetter, i int, at *model.Attention, hidden int) *attnWeights {
	name := func(s string) string { return model.LayerTensor(i, s) }
	qRows := at.Heads * at.HeadDim
	if at.OutputGate {
		qRows *= 2
	}
	kvRows := at.KVHeads * at.HeadDim
	aw := &attnWeights{
		spec: at,
		q:    w.matrix(name(model.AttnQ), qRows, hidden),
		k:    w.matrix(name(model.AttnK), kvRows, hidden),
		v:    w.matrix(name(model.AttnV), kvRows, hidden),
		o:    w.matrix(name(model.AttnOut), hidden, at.Heads*at.HeadDim),
	}
	if at.Bias {
		aw.qb = w.vector(name(model.AttnQBias), qRows)
		aw.kb = w.vector(name(model.AttnKBias), kvRows)
		aw.vb = w.vector(name(model.AttnVBias), kvRows)
	}
	if at.OutBias {
		aw.ob = w.vector(name(model.AttnOutBias), hidden)
	}
	if at.Sinks {
		aw.sinks = w.vector(name(model.AttnSinks), at.Heads)
	}
	switch at.QKNorm {
	case model.QKNormPerHead:
		aw.qNorm = w.vector(name(model.AttnQNorm), at.HeadDim)
		aw.kNorm = w.vector(name(model.AttnKNorm), at.HeadDim)
	case model.QKNormFull:
		aw.qNorm = w.vector(name(model.AttnQNorm), at.Heads*at.HeadDim)
		aw.kNorm = w.vector(name(model.AttnKNorm), kvRows)
	case model.QKNormNone:
	default:
		w.fail(fmt.Errorf("cpu: layer %d: unknown q/k norm %q", i, at.QKNorm))
	}
	rt, err := model.NewRopeTable(at.Rope, at.HeadDim)
	if err != nil {
		w.fail(fmt.Errorf("cpu: layer %d: %w", i, err))
	}
	aw.rope = rt
	return aw
}

// weightGetter fetches tensors by canonical name, checking shapes; the first
// error sticks.
type weightGetter struct {
	w    model.Weights
	err  error
	seen *[]*tensor.Tensor // tensors handed out
}

func (g *weightGetter) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

// missing fails with the weights' own error (a damaged or unreadable
// tensor) when they recorded one, else with "missing tensor".
func (g *weightGetter) missing(name string) {
	if err := model.WeightsErr(g.w); err != nil {
		g.fail(err)
		return
	}
	g.fail(fmt.Errorf("cpu: missing tensor %q", name))
}

func (g *weightGetter) tensor(name string, shape ...int) *tensor.Tensor {
	t, ok := g.w.Tensor(name)
	if !ok {
		g.missing(name)
		return nil
	}
	if len(t.Shape) != len(shape) {
		g.fail(fmt.Errorf("cpu: tensor %q has shape %v, want %v", name, t.Shape, shape))
		return nil
	}
	for i := range shape {
		if t.Shape[i] != shape[i] {
			g.fail(fmt.Errorf("cpu: tensor %q has shape %v, want %v", name, t.Shape, shape))
			return nil
		}
	}
	n, err := tensor.ByteLen(t.Codec, t.Shape)
	if err != nil || int64(len(t.Data)) != n || t.Codec == tensor.I32 {
		g.fail(fmt.Errorf("cpu: tensor %q (%s %v): %d bytes of data, want %d (%v)", name, t.Codec, t.Shape, len(t.Data), n, err))
		return nil
	}
	if err := t.CheckSide(); err != nil {
		g.fail(fmt.Errorf("cpu: %w", err))
		return nil
	}
	if g.seen != nil {
		*g.seen = append(*g.seen, t)
	}
	return t
}

func (g *weightGetter) matrix(name string, rows, cols int) *tensor.Tensor {
	return g.tensor(name, rows, cols)
}

// vector decodes a small tensor (a norm weight, a bias) to float32. A [1, n]
// or [n] shape is accepted.
func (g *weightGetter) vector(name string, n int) []float32 {
	t, ok := g.w.Tensor(name)
	if !ok {
		g.missing(name)
		return nil
	}
	if t.Elements() != n {
		g.fail(fmt.Errorf("cpu: tensor %q has shape %v, want %d elements", name, t.Shape, n))
		return nil
	}
	v := make([]float32, n)
	if err := tensor.Dequantize(v, t.Codec, t.Data); err != nil {
		g.fail(fmt.Errorf("cpu: tensor %q: %w", name, err))
		return nil
	}
	return v
}

// Name is "cpu".
func (b *Backend) Name() string { return "cpu" }

// Close releases nothing: the model's weights belong to the caller.
func (b *Backend) Close() error { return nil }

// NewSession allocates a session for at most maxLen positions.
func (b *Backend) NewSession(maxLen int) (backend.Session, error) {
	return b.newSession(maxLen)
}

var _ backend.Backend = (*Backend)(nil)

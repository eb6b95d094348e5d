// Package engine is the facade every front end (CLI, server, browser) uses:
// it loads a model from any supported source, picks a backend, and runs
// generation with sampling and streaming detokenization.
//
// The engine is the scheduler. Backend choice: one policy (choose.go) for
// every front end, over the backends this build registers (backends.go):
// Options.Backend "auto", "cpu" or a device backend's name. A device
// backend that refuses the model, or fails mid-generation, hands over to
// the CPU backend, which replays the sequence from the start: the tokens
// are those of a pure CPU run and no half-computed result is ever
// returned. A device that holds only some layers runs them and the CPU
// the rest, one step at a time (split.go); no backend calls another.
//
// Generation may decode speculatively (Request.Spec, spec.go: n-gram lookup
// or a draft model, verified in one batched step, the rejected tail
// rewound) and may continue a kept session that shares the prompt's prefix
// (Options.PrefixCacheBytes, prefix.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/sample"
	"github.com/cortiq/cortiq/tokenizer"
)

// Options select and tune the backend.
type Options struct {
	Backend    string // "auto" (default), "cpu", or a registered device backend ("webgpu"); see choose
	MaxContext int    // positions per session; 0 = the model's context, capped at 4096; at most max(the model's context, 4096)
	GPULayers  string // layer ranges for the device ("0-9,20-29"); "" = all that fit
	// VRAMBudget is the bytes the device may hold (0 = the adapter's
	// limit): weights, and with an explicit MaxContext one session of that
	// context (KV, state, activations); a context that does not fit beside
	// the embedding and head is refused on the device (the CPU runs).
	VRAMBudget int64
	// MemBudget bounds the memory of one CPU session (KV, recurrent state,
	// the activations of a prompt step): a context that needs more is
	// refused with what it needs (0 = no bound).
	MemBudget int64
	// KV is the KV cache element: "f32" (the default: exact) or "f16"
	// (half the memory; logits move by ~1e-3..3e-2 on the fixtures).
	KV string
	// PrefillOnCPU runs a generation's prompt on the CPU and hands its
	// state (KV cache, recurrent state) to the device session for the
	// decode; a device session that cannot take it replays the prompt.
	PrefillOnCPU bool
	// RewindDepth is the number of newest positions a session of a model
	// with recurrent layers can rewind exactly (speculative decoding
	// rewinds up to Spec.K); 0 = backend.DefaultRewindDepth.
	RewindDepth int
	// PrefixCacheBytes keeps finished sessions (KV cache, recurrent
	// state) up to about this many bytes, least recently used out first:
	// a request whose prompt shares a prefix with one prefills only the
	// rest (see prefix.go). 0 = off.
	PrefixCacheBytes int64
	// ProbeCache is the file where --backend auto's speed verdicts are
	// remembered (package probe), per engine version, raced devices and op
	// class; "" measures on every load.
	ProbeCache string
	// Tuning is the device backend's own knobs (a webgpu.Tuning), built
	// by cmd/* from the environment; nil = the backend's defaults.
	Tuning any
	// NoProbe keeps the first device --backend auto opens (autoDevices
	// order) without racing the devices and the CPU (CORTIQ_PROBE=0 in
	// the CLI; the browser tab).
	NoProbe bool
	// AllowSoftware lets --backend auto keep a software adapter
	// (lavapipe, SwiftShader); a backend asked for by name always may.
	AllowSoftware bool
	// CPUOnDemand builds the CPU backend only when a session needs it, so
	// a model the device holds is not also read into memory (the browser
	// tab's heap); without a device that opens it is built at load. No
	// probe runs then.
	CPUOnDemand bool
	// WrapWeights, when set, wraps the model's weights once the tokenizer
	// is in, before any backend reads them (the tab paces its garbage
	// collector between tensors and times the upload).
	WrapWeights func(model.Weights) model.Weights
	// Progress, when set, is told each slow stage of a load as it starts
	// ("importing …", "uploading the weights to the device", …).
	Progress func(stage string)
}

// Engine is a loaded model with its tokenizer and backends. It is safe for
// concurrent use: each generation gets its own session.
type Engine struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer // nil when the source carries none
	opts      Options
	dev       backend.Backend // nil when running on the CPU only
	devErr    error           // why the device backend is not in use (a fault)
	devReason string          // why the auto choice declined a working device
	probe     []ClassVerdict  // the auto choice's race, per op class
	owned     bool            // Close releases the backends and the model

	spec   *Spec        // the default speculation (SetSpec)
	prefix *prefixCache // nil without Options.PrefixCacheBytes

	cpuMu  sync.Mutex
	cpu    backend.Backend // built by cpuNew on first use when nil
	cpuNew func() (backend.Backend, error)
}

// NewFromModel builds an engine around an already imported model.
func NewFromModel(m *model.Model, opts Options) (*Engine, error) {
	return newFromModel(context.Background(), m, opts)
}

// newFromModel is NewFromModel stopping when ctx is done: after the CPU
// backend, during the device's upload and during the speed probe. It then
// returns ctx's error with every backend it opened closed (the model is
// the caller's).
func newFromModel(ctx context.Context, m *model.Model, opts Options) (*Engine, error) {
	if opts.Backend == "" {
		opts.Backend = "auto"
	}
	e := &Engine{Model: m, opts: opts, owned: true}
	switch opts.KV {
	case "", "f32", "f16":
	default:
		return nil, fmt.Errorf("engine: KV cache %q: want f32 or f16", opts.KV)
	}
	c, err := choose(opts.Backend)
	if err != nil {
		return nil, err
	}
	if err := e.checkContext(opts.MaxContext); err != nil {
		return nil, err
	}
	if err := e.checkMemory(e.maxContext()); err != nil {
		return nil, err
	}
	if opts.PrefixCacheBytes > 0 {
		e.prefix = &prefixCache{budget: opts.PrefixCacheBytes}
	}
	if m.Tokenizer != nil {
		tok, err := tokenizer.Load(m.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("engine: tokenizer: %w", err)
		}
		e.Tokenizer = tok
	}
	if opts.WrapWeights != nil {
		m.Weights = opts.WrapWeights(m.Weights)
	}
	// Built on demand after the load too: not cancelled with it.
	cpuCtx := context.WithoutCancel(ctx)
	e.cpuNew = func() (backend.Backend, error) {
		cb, err := backend.Open(cpuCtx, "cpu", m, e.cpuOptions())
		if err != nil {
			return nil, weightsErr(m, err)
		}
		return cb, nil
	}
	if !opts.CPUOnDemand {
		if _, err := e.cpuBackend(); err != nil {
			return nil, err
		}
	}
	if ctx.Err() != nil {
		return e.stopped(ctx)
	}
	e.openDevice(ctx, c, e.cpu)
	if ctx.Err() != nil {
		return e.stopped(ctx)
	}
	if e.devErr != nil {
		e.devErr = weightsErr(m, e.devErr)
	}
	if e.dev == nil && e.cpu == nil {
		if _, err := e.cpuBackend(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// stopped closes what a load cancelled by ctx opened and returns ctx's
// error (the model is the caller's).
func (e *Engine) stopped(ctx context.Context) (*Engine, error) {
	if e.dev != nil {
		e.dev.Close()
		e.dev = nil
	}
	if e.cpu != nil {
		e.cpu.Close()
		e.cpu = nil
	}
	return nil, ctx.Err()
}

// weightsErr prefers the read error a lazily read model recorded over the
// "missing tensor" it caused.
func weightsErr(m *model.Model, err error) error {
	if w, ok := m.Weights.(interface{ Err() error }); ok && w.Err() != nil {
		return fmt.Errorf("reading weights: %w", w.Err())
	}
	return err
}

// cpuBackend is the CPU backend, built on first use.
func (e *Engine) cpuBackend() (backend.Backend, error) {
	e.cpuMu.Lock()
	defer e.cpuMu.Unlock()
	if e.cpu == nil {
		if e.cpuNew == nil {
			return nil, errors.New("engine: no CPU backend")
		}
		c, err := e.cpuNew()
		if err != nil {
			return nil, err
		}
		e.cpu = c
	}
	return e.cpu, nil
}

// DeviceError says why no device backend is in use (nil when one is, or
// when none was asked for, or when the auto choice measured the CPU as
// faster: see BackendReason).
func (e *Engine) DeviceError() error { return e.devErr }

// BackendReason says why the auto choice runs on the CPU although a
// working device exists (the CPU decodes this model faster); "" otherwise.
func (e *Engine) BackendReason() string { return e.devReason }

// ProbeVerdicts are the verdicts per op class of the race --backend auto
// ran (or adopted from the cache) among the device backends that opened
// and the CPU; nil when no race ran (a backend asked for by name,
// Options.NoProbe, no device).
func (e *Engine) ProbeVerdicts() []ClassVerdict { return slices.Clone(e.probe) }

// Device is the device backend new sessions start on, nil when they start
// on the CPU.
func (e *Engine) Device() backend.Backend { return e.dev }

// BackendName is the backend new sessions start on.
func (e *Engine) BackendName() string {
	if e.dev != nil {
		return e.dev.Name()
	}
	return "cpu"
}

// Close releases the backends and the model's mapping.
func (e *Engine) Close() error {
	e.closePrefix()
	if !e.owned {
		return nil
	}
	var errs []error
	if e.dev != nil {
		errs = append(errs, e.dev.Close())
	}
	if e.cpu != nil {
		errs = append(errs, e.cpu.Close())
	}
	if e.Model.Close != nil {
		errs = append(errs, e.Model.Close())
	}
	return errors.Join(errs...)
}

func (e *Engine) maxContext() int {
	n := e.opts.MaxContext
	if n <= 0 {
		n = e.Model.Arch.Context
		if n <= 0 || n > defaultContextCap {
			n = defaultContextCap
		}
	}
	return n
}

// defaultContextCap bounds the default context (MaxContext 0).
const defaultContextCap = 4096

// checkContext refuses a context size that is negative or beyond the
// model's own context (or the default cap, when that is larger: positions
// past a model's trained length run, as llama.cpp lets them, at the
// user's risk). 0 is the default.
func (e *Engine) checkContext(n int) error {
	limit := max(e.Model.Arch.Context, defaultContextCap)
	if n < 0 || n > limit {
		return fmt.Errorf("engine: context size %d: want 1..%d (the model's context is %d), or 0 for the default", n, limit, e.Model.Arch.Context)
	}
	return nil
}

func (e *Engine) cpuOptions() backend.Options {
	return backend.Options{RewindDepth: e.opts.RewindDepth, KVF16: e.opts.KV == "f16"}
}

// Memory is what one session of a context needs on each backend.
type Memory struct {
	Backend string `json:"backend"` // "cpu" or "webgpu"
	backend.Memory
}

// MemoryFor estimates one session of ctx positions of an architecture on
// the CPU and on a WebGPU device with opts (KV, RewindDepth), from the
// architecture alone: what `cortiq info --ctx N` prints. The CPU's
// activations are those of a prompt of ctx tokens in one step.
func MemoryFor(a *model.Arch, ctx int, opts Options) []Memory {
	o := backend.Options{RewindDepth: opts.RewindDepth, KVF16: opts.KV == "f16"}
	out := make([]Memory, len(sessionBytes))
	for i, sb := range sessionBytes {
		out[i] = Memory{sb.name, sb.bytes(a, ctx, o)}
	}
	return out
}

// mib formats a byte count.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// checkMemory refuses a context whose CPU session does not fit MemBudget.
func (e *Engine) checkMemory(ctx int) error {
	if e.opts.MemBudget <= 0 {
		return nil
	}
	need := MemoryFor(&e.Model.Arch, ctx, e.opts)[0].Memory
	if need.Total() > e.opts.MemBudget {
		return fmt.Errorf("engine: a context of %d positions needs %s on the CPU (KV %s, state %s, activations %s); the memory budget is %s: lower the context or use an f16 KV cache",
			ctx, mib(need.Total()), mib(need.KV), mib(need.State), mib(need.Activations), mib(e.opts.MemBudget))
	}
	return nil
}

// Request is one generation.
type Request struct {
	Prompt     string // tokenized with the model's tokenizer (BOS per its rules)
	IDs        []int  // used instead of Prompt when non-nil; no BOS is added
	MaxTokens  int    // 0, or more than the context has room for, = to the end of the context
	Sampling   sample.Params
	Stop       []string // stop strings (not included in the text)
	IgnoreEOS  bool     // keep going past end-of-sequence ids
	MaxContext int      // 0 = the engine's
	Backend    string   // "cpu" runs this request on the CPU even when a device is in use
	// GreedyBatch > 1 lets a greedy generation without penalties pick that
	// many tokens per device submit (the argmax feeding the next embedding
	// on the device). Tokens still stream one by one, in bursts.
	GreedyBatch int
	// Spec, when set, decodes speculatively (see Spec); GreedyBatch then
	// sizes the plain stretches the governor interleaves.
	Spec *Spec
}

// Token is one generated token as it streams.
type Token struct {
	ID      int    `json:"id"`
	Text    string `json:"text"` // the UTF-8 text this token completes (may be "")
	Backend string `json:"-"`    // the backend that computed it
}

// Result summarizes a finished generation.
type Result struct {
	IDs              []int   `json:"ids"`
	Text             string  `json:"text"`
	PromptTokens     int     `json:"prompt_tokens"`
	PrefillTokS      float64 `json:"prefill_tok_s"`
	DecodeTokS       float64 `json:"decode_tok_s"`
	Backend          string  `json:"backend"`
	FinishReason     string  `json:"finish_reason"` // "length", "stop", "eos", "cancelled"
	FallbackOps      int     `json:"fallback_ops"`
	SubmitsPerToken  float64 `json:"submits_per_token"`
	UploadBytesDelta int64   `json:"upload_bytes_delta"`
	WeightBytesToken int64   `json:"weight_bytes_per_token,omitempty"` // weight bytes the device reads per decode step
	ResidentBytes    int64   `json:"resident_bytes,omitempty"`
	DeviceError      string  `json:"device_error,omitempty"`   // a device fault sent the work to the CPU
	BackendReason    string  `json:"backend_reason,omitempty"` // why auto chose the CPU over a working device
	// CachedTokens are the prompt's leading tokens a kept session already
	// held (Options.PrefixCacheBytes): only the rest were prefilled.
	CachedTokens int `json:"cached_tokens,omitempty"`
	// Spec reports speculative decoding (nil without).
	Spec *SpecStats `json:"spec,omitempty"`
	// ReadbackPerToken is the bytes read back from the device per decoded
	// token (after the first decode step).
	ReadbackPerToken float64 `json:"readback_bytes_per_token,omitempty"`
}

// Encode tokenizes a prompt with the model's rules for special tokens.
func (e *Engine) Encode(text string) ([]int, error) {
	if e.Tokenizer == nil {
		return nil, errors.New("engine: the model has no tokenizer: pass token ids")
	}
	return e.Tokenizer.Encode(text, true), nil
}

// Generate runs one generation, calling onToken for each new token.
// Returning an error from onToken stops the generation with that error.
func (e *Engine) Generate(ctx context.Context, req Request, onToken func(Token) error) (*Result, error) {
	prompt := req.IDs
	if prompt == nil {
		ids, err := e.Encode(req.Prompt)
		if err != nil {
			return nil, err
		}
		prompt = ids
	}
	if len(prompt) == 0 {
		return nil, errors.New("engine: empty prompt")
	}
	vocab := e.Model.Arch.Vocab
	for _, id := range prompt {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("engine: token id %d outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	for _, n := range []int{e.opts.MaxContext, req.MaxContext} {
		if err := e.checkContext(n); err != nil {
			return nil, err
		}
	}
	maxCtx := req.MaxContext
	if maxCtx == 0 {
		maxCtx = e.maxContext()
	} else if err := e.checkMemory(maxCtx); err != nil {
		return nil, err
	}
	if len(prompt) >= maxCtx {
		return nil, fmt.Errorf("engine: prompt of %d tokens does not fit the context of %d", len(prompt), maxCtx)
	}
	// Clamp to the room left, compared without adding (a MaxTokens near
	// the int limit would overflow len(prompt)+MaxTokens).
	maxNew := req.MaxTokens
	if room := maxCtx - len(prompt); maxNew <= 0 || maxNew > room {
		maxNew = room
	}
	sess, reused, err := e.acquire(prompt, maxCtx, req.Backend)
	if err != nil {
		return nil, err
	}
	sound := false // the generation ended without error: the session may be kept
	defer func() { e.release(sess, sound) }()

	res := &Result{PromptTokens: len(prompt), CachedTokens: reused, FinishReason: "length"}
	if e.devErr != nil {
		res.DeviceError = e.devErr.Error()
	}
	res.BackendReason = e.devReason
	smp := sample.New(req.Sampling)
	var sp *speculator
	if req.Spec == nil {
		req.Spec = e.spec
	}
	if req.Spec != nil {
		if sp, err = e.newSpeculator(*req.Spec, sess, smp, req.Sampling, maxCtx, req.Backend); err != nil {
			return nil, err
		}
		defer sp.close()
	}
	history := append([]int(nil), prompt...)
	var dec *tokenizer.StreamDecoder
	if e.Tokenizer != nil {
		// The prompt primes the decoder: the first generated token is a
		// continuation, not the start of the text.
		dec = e.Tokenizer.NewStreamDecoderAfter(prompt, false)
	}
	var text strings.Builder
	stopper := NewStopMatcher(req.Stop)

	t0 := time.Now()
	if sp != nil {
		// A draft reads the prompt with the target (its time to first
		// token), so decoding pays only its catch-ups on generated tokens;
		// first, so that the target's weights are the ones the caches
		// hold when decoding starts.
		if err := sp.prefill(prompt); err != nil {
			return nil, err
		}
	}
	logits, err := sess.prefill(prompt[reused:])
	if err != nil {
		return nil, err
	}
	tPrefill := time.Since(t0)
	if sp != nil {
		sp.submits0, sp.readback0 = sp.devCounters() // the decode's, not the prefill's
	}
	res.PrefillTokS = float64(len(prompt)-reused) / tPrefill.Seconds()
	var upAfterFirst, subAfterFirst, tokAfterFirst, rbAfterFirst int64
	decodedAtFirst := 0
	t1 := time.Now()
	decoded := 0
	p := req.Sampling
	// Greedy picks without penalties need no logits on the host: the device
	// takes the argmax and sends back one id (a vocabulary of logits per
	// token costs a large readback plus garbage), GreedyBatch of them per
	// submit.
	batch := 0
	if argmaxOnly(p) {
		batch = max(req.GreedyBatch, 1)
	}
	// pending holds ids the device already picked; all but the last of
	// them are already consumed.
	var pending []int
	for n := 0; n < maxNew; n++ {
		if err := ctx.Err(); err != nil {
			res.FinishReason = "cancelled"
			break
		}
		var id int
		consumed := false
		if len(pending) > 0 {
			id, pending = pending[0], pending[1:]
			consumed = len(pending) > 0
		} else {
			id = smp.Sample(logits, history)
		}
		history = append(history, id)
		res.IDs = append(res.IDs, id)
		piece := ""
		if dec != nil {
			piece = dec.Next(id)
		}
		isEOS := !req.IgnoreEOS && e.isEOS(id)
		emit, stopped := stopper.Push(piece)
		if isEOS {
			emit += stopper.Flush()
		}
		text.WriteString(emit)
		if onToken != nil && (!isEOS || emit != "") {
			if err := onToken(Token{ID: id, Text: emit, Backend: sess.name()}); err != nil {
				return nil, err
			}
		}
		if stopped {
			res.FinishReason = "stop"
			break
		}
		if isEOS {
			res.FinishReason = "eos"
			break
		}
		if n == maxNew-1 {
			break
		}
		if consumed {
			decoded++
			continue
		}
		if sp != nil && sp.gov != nil {
			sp.gov.mark()
			if err := sp.syncDraft(history); err != nil {
				return nil, err
			}
		}
		switch {
		case sp != nil && sp.speculate():
			// The speculator consumes id with its drafts.
			pending, err = sp.step(history, maxNew-1-n)
			if err == nil && sp.gov != nil {
				sp.gov.emitted(true, len(pending))
			}
		case batch > 0:
			k := min(batch, maxNew-1-n)
			next := min(batch, maxNew-1-n-k)
			if sp != nil && sp.gov.lastPlain(k) {
				next = 0 // speculation resumes after this call
			}
			pending, err = sess.ForwardGreedy(id, k, next)
			if err == nil && sp != nil {
				sp.gov.emitted(false, len(pending))
				sp.stats.PlainTokens += len(pending)
			}
		default:
			logits, err = sess.Forward([]int{id}, false)
			if err == nil && sp != nil {
				sp.gov.emitted(false, 1)
				sp.stats.PlainTokens++
			}
		}
		if err != nil {
			return nil, err
		}
		decoded++
		if decoded == 1 {
			upAfterFirst = sess.uploadBytes()
			subAfterFirst, tokAfterFirst = sess.counters()
			rbAfterFirst, decodedAtFirst = sess.readback(), len(res.IDs)
		}
	}
	if res.FinishReason == "length" || res.FinishReason == "cancelled" {
		// A character left incomplete by the last token comes out as U+FFFD,
		// so the streamed text always equals the full decode.
		if dec != nil {
			if tail, stopped := stopper.Push(dec.Flush()); stopped {
				text.WriteString(tail)
				res.FinishReason = "stop"
			} else {
				text.WriteString(tail)
			}
		}
		text.WriteString(stopper.Flush())
	}
	if decoded > 0 {
		res.DecodeTokS = float64(decoded) / time.Since(t1).Seconds()
	}
	res.Text = text.String()
	if sp != nil {
		res.Spec = sp.finish(len(res.IDs)-1, res.DecodeTokS)
	}
	res.Backend = sess.name()
	if sess.failure != nil {
		res.DeviceError = sess.failure.Error()
	} else if sess.prefillErr != nil {
		res.DeviceError = sess.prefillErr.Error()
	}
	st := sess.stats()
	res.FallbackOps = st.FallbackOps + sess.fallbacks
	res.SubmitsPerToken = st.SubmitsPerToken
	res.WeightBytesToken = st.WeightBytesToken
	res.ResidentBytes = st.ResidentBytes
	if decoded > 1 {
		res.UploadBytesDelta = sess.uploadBytes() - upAfterFirst
		if n := len(res.IDs) - decodedAtFirst; n > 0 {
			res.ReadbackPerToken = float64(sess.readback()-rbAfterFirst) / float64(n)
		}
		// Steady decode: the submits per token after the first decode step
		// (sessions running concurrently on the same device blur this).
		if sub, tok := sess.counters(); tok > tokAfterFirst {
			res.SubmitsPerToken = float64(sub-subAfterFirst) / float64(tok-tokAfterFirst)
		}
	}
	sound = true
	return res, nil
}

func (e *Engine) isEOS(id int) bool {
	if e.Tokenizer != nil && e.Tokenizer.IsEOS(id) {
		return true
	}
	for _, x := range e.Model.Arch.EOS {
		if x == id {
			return true
		}
	}
	return false
}

// Logits returns the logits of every position of ids ([len(ids)*vocab]).
func (e *Engine) Logits(ctx context.Context, ids []int) ([]float32, error) {
	r, err := e.LogitsOn(ctx, ids, "")
	if err != nil {
		return nil, err
	}
	return r.Logits, nil
}

// LogitsResult is what LogitsOn computed and where.
type LogitsResult struct {
	Logits      []float32 // [len(ids)*vocab]
	Backend     string
	DeviceError string // why the device did not compute them, when it was to
}

// LogitsOn is Logits on the backend Request.Backend would choose.
func (e *Engine) LogitsOn(ctx context.Context, ids []int, backend string) (*LogitsResult, error) {
	vocab := e.Model.Arch.Vocab
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("engine: token id %d outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	sess, err := e.newSession(len(ids)+1, backend)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	out, err := sess.Forward(ids, true)
	if err != nil {
		return nil, err
	}
	r := &LogitsResult{Logits: out, Backend: sess.name()}
	if sess.failure != nil {
		r.DeviceError = sess.failure.Error()
	}
	return r, nil
}

// Package server is cortiq's network front end: an OpenAI-compatible HTTP
// API (/v1/models, /v1/completions, /v1/chat/completions with server-sent
// events), a versioned websocket remote-control protocol (/v1/ws, see
// docs/protocol.md), Prometheus metrics, and static files for the browser
// bundle and the served models.
//
// Generations run on workers: the server's own models (native workers,
// added with AddModel) and browser tabs that attach to /v1/ws?role=worker
// and relay generations to their own engine. Every generation, whatever
// its front end, goes through one admission path that enforces the
// server's limits and feeds the metrics.
//
// Security contract: a Server refuses to listen on a non-loopback address
// without a token (CheckBind); with a token, every API request and
// websocket needs it (bearer header, or an auth message on the socket),
// compared in constant time; every request's Origin (scheme, host and
// port) must be the server's own or in an allow-list; request bodies,
// websocket messages, per-connection send queues and concurrent
// generations are bounded, and a client that cannot keep up is dropped
// instead of stalling others; headers, bodies and authentication must
// arrive in time, and connections not yet authenticated are bounded in
// number; a browser worker that stops answering fails its job.
package server

import (
	"context"

	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/sample"
)

// ProtocolVersion is the websocket protocol's version, sent in hello.
// It changes only when a message changes incompatibly.
const ProtocolVersion = 1

// ChatMessage is one chat turn.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// GenRequest is one generation as the server hands it to a worker. Exactly
// one of Prompt, IDs and Messages selects the input: Messages go through
// the model's chat template (the worker renders them), IDs are used as
// they are (no BOS added), Prompt is tokenized with the model's rules.
type GenRequest struct {
	Prompt    string        `json:"prompt,omitempty"`
	IDs       []int         `json:"ids,omitempty"`
	Messages  []ChatMessage `json:"messages,omitempty"`
	MaxTokens int           `json:"max_tokens,omitempty"`
	Sampling  sample.Params `json:"-"`
	Stop      []string      `json:"stop,omitempty"`
	IgnoreEOS bool          `json:"ignore_eos,omitempty"`
}

// Token is one generated token as it streams.
type Token struct {
	ID   int    `json:"id"`
	Text string `json:"text"` // the UTF-8 text this token completes (may be "")
}

// Result summarizes a finished generation. FinishReason is "length",
// "stop", "eos", "cancelled" or, when the server shut down under it,
// "shutdown".
type Result struct {
	IDs          []int   `json:"ids"`
	Text         string  `json:"text"`
	PromptTokens int     `json:"prompt_tokens"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	Backend      string  `json:"backend"`
	FinishReason string  `json:"finish_reason"`
	DeviceError  string  `json:"device_error,omitempty"`
	// CachedTokens are the prompt tokens a kept session already held
	// (prefix reuse): only the rest were prefilled.
	CachedTokens int `json:"cached_tokens,omitempty"`
	// Spec reports speculative decoding, when the model uses it.
	Spec *engine.SpecStats `json:"spec,omitempty"`
	// BackendReason: why auto chose the CPU over a working device.
	BackendReason string `json:"backend_reason,omitempty"`
	// Server-side timings, filled by the server, not the worker.
	TTFTMs  float64 `json:"ttft_ms"`
	TotalMs float64 `json:"total_ms"`
	Worker  string  `json:"worker,omitempty"`
}

// Model is what a native worker runs: the engine facade seen through the
// server's own types, so that the server is tested without a model
// (see FromEngine for the real one). Generate must be safe for concurrent
// use, must stop soon after ctx is done (returning a Result whose
// FinishReason is "cancelled", or ctx's error), and stops with onToken's
// error when onToken returns one.
type Model interface {
	Generate(ctx context.Context, req GenRequest, onToken func(Token) error) (*Result, error)
	BackendName() string
	Close() error
}

// WorkerInfo describes a worker in listings.
type WorkerInfo struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"` // "native" or "browser"
	Name    string   `json:"name,omitempty"`
	Models  []string `json:"models"`
	Backend string   `json:"backend,omitempty"`
	Active  int      `json:"active"`
}

// Progress is one step of a model load.
type Progress struct {
	Stage  string `json:"stage"`            // "resolving", "loading", "ready", or a worker's own
	Loaded int64  `json:"loaded,omitempty"` // bytes so far, when known
	Total  int64  `json:"total,omitempty"`  // bytes in all, when known
	Step   int    `json:"step,omitempty"`   // stage "step" (an imagine job): steps done
	Steps  int    `json:"steps,omitempty"`  // stage "step": steps in all
}

// Loader loads a model for the websocket "load" command on the server
// itself. nameOrPath comes from an authenticated client. It returns the
// model, its listed name and the path its files are served from.
type Loader func(ctx context.Context, nameOrPath string, progress func(Progress)) (m Model, name, path string, err error)

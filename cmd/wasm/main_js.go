//go:build js

// Command wasm is cortiq's engine for a browser tab: built with GOOS=js
// GOARCH=wasm into web/cortiq.wasm, it runs inside the dedicated Worker of
// web/worker.js, never on the page's thread, so the page stays responsive.
//
// Protocol (see web/worker.js and web/cortiq.js, which exposes it to the page
// as window.cortiq): worker.js hands every message from the page to
// globalThis.cortiqHandle as a JSON string {id, op, ...}; the engine answers
// with postMessage objects {id, type} where type is "progress", "token",
// "result" (with value) or "error" (with message), and posts {type: "ready"}
// once it accepts requests. Ops: load, generate, logits, stats, unload, stop,
// cached, remove, imagine (a text-to-image pipeline: progress events per
// step, then the PNG and the float image). Requests run one at a time in arrival order, except stop,
// which cancels the running request at once (a generation ends with
// finishReason "cancelled"; a download stops, resumable later).
//
// Models are downloaded into the Origin Private File System (storage/opfs,
// resumable and verified by storage/download) and imported from there
// through Go's os package, which worker.js backs with a read-only OPFS file
// system (the importer reads tensors with ReadAt, so a GGUF or CMF file is
// never held whole in the wasm heap while it is uploaded to the GPU).
// WebGPU comes from navigator.gpu through the webgpu package's AcquireJS
// seam; with no adapter the float32 CPU engine runs in wasm and says so.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"syscall/js"
	"time"
)

// request is one message from the page.
type request struct {
	ID int    `json:"id"`
	Op string `json:"op"`

	// load
	Source  string `json:"source"`
	SHA256  string `json:"sha256"`  // expected digest of a single-file URL
	Size    int64  `json:"size"`    // expected size of a single-file URL
	Refresh bool   `json:"refresh"` // ignore the OPFS copy's manifest and ask the server again
	Retries *int   `json:"retries"` // automatic resumes of a broken transfer (default 3)
	// Checkpoint is how often (bytes) a download records its progress, so
	// an interruption loses at most this much (default 1 MiB).
	Checkpoint int64 `json:"checkpoint"`
	Persisted  bool  `json:"persisted"` // what navigator.storage.persist() said on the page
	// Token is the bearer token of the page's own server (cortiq serve
	// --token): sent with model requests to that origin, never elsewhere.
	Token string `json:"token"`
	// AvailableBytes, when positive, stands in for the origin's free space
	// (quota - usage) in the quota checks: tests and demos of the failure.
	AvailableBytes int64 `json:"availableBytes"`

	// generate / logits
	Backend     string    `json:"backend"` // auto (default), webgpu, cpu
	Prompt      string    `json:"prompt"`
	Messages    []message `json:"messages"` // chat turns, rendered with the model's template
	IDs         []int     `json:"ids"`
	MaxTokens   int       `json:"maxTokens"`
	Temperature float32   `json:"temperature"`
	TopK        int       `json:"topK"`
	TopP        float32   `json:"topP"`
	MinP        float32   `json:"minP"`
	Repeat      float32   `json:"repeatPenalty"`
	Presence    float32   `json:"presencePenalty"`
	Frequency   float32   `json:"frequencyPenalty"`
	RepeatLastN int       `json:"repeatLastN"`
	Seed        uint64    `json:"seed"`
	IgnoreEOS   bool      `json:"ignoreEOS"`
	Stop        []string  `json:"stop"`

	// imagine (prompt, seed and backend as above)
	Negative string    `json:"negativePrompt"`
	Width    int       `json:"width"`
	Height   int       `json:"height"`
	Steps    int       `json:"steps"`
	Guidance float32   `json:"guidance"`
	Latents  []float32 `json:"latents"` // the initial noise, as diffusers' latents=
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// worker serializes requests and tracks the running generation.
type worker struct {
	queue chan request

	mu      sync.Mutex
	cancels map[int]context.CancelFunc // running request id -> cancel

	st *state
}

func main() {
	// A model's weights pass through the heap tensor by tensor; collect
	// garbage early rather than let the wasm memory (which never shrinks)
	// grow to twice the live heap.
	debug.SetGCPercent(50)
	w := &worker{queue: make(chan request, 64), cancels: map[int]context.CancelFunc{}, st: newState()}
	handle := js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) == 0 || args[0].Type() != js.TypeString {
			return nil
		}
		var r request
		if err := json.Unmarshal([]byte(args[0].String()), &r); err != nil {
			post(map[string]any{"type": "error", "message": "bad request: " + err.Error()})
			return nil
		}
		if strings.HasPrefix(r.Op, "__") {
			// Reserved for tools injected into the Worker (profilers);
			// they answer for themselves.
			return nil
		}
		if r.Op == "stop" {
			// Handled here, not queued: the generation it stops holds the
			// queue.
			w.stop(r)
			return nil
		}
		w.queue <- r
		return nil
	})
	js.Global().Set("cortiqHandle", handle)
	post(map[string]any{"type": "ready", "webgpu": js.Global().Get("navigator").Get("gpu").Truthy()})
	for r := range w.queue {
		w.serve(r)
	}
}

func (w *worker) stop(r request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cancel := range w.cancels {
		cancel()
	}
	reply(r.ID, "result", map[string]any{"stopped": len(w.cancels)})
}

func (w *worker) serve(r request) {
	ctx, cancel := context.WithCancel(context.Background())
	w.mu.Lock()
	w.cancels[r.ID] = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.cancels, r.ID)
		w.mu.Unlock()
		cancel()
		if p := recover(); p != nil {
			reply(r.ID, "error", map[string]any{"message": fmt.Sprintf("engine panic: %v\n%s", p, debug.Stack())})
		}
	}()
	var (
		v   any
		err error
	)
	switch r.Op {
	case "load":
		v, err = w.st.load(ctx, r)
	case "generate":
		v, err = w.st.generate(ctx, r)
	case "imagine":
		v, err = w.st.imagine(ctx, r)
	case "logits":
		v, err = w.st.logits(ctx, r)
	case "stats":
		v, err = w.st.stats(), nil
	case "unload":
		err = w.st.unload()
		v = map[string]any{"unloaded": true}
	case "cached":
		v, err = w.st.cached()
	case "remove":
		err = w.st.remove(r.Source)
		v = map[string]any{"removed": r.Source}
	default:
		err = fmt.Errorf("unknown op %q", r.Op)
	}
	if err != nil {
		reply(r.ID, "error", map[string]any{"message": err.Error(), "kind": errorKind(err)})
		return
	}
	if jv, ok := v.(js.Value); ok {
		reply(r.ID, "result", map[string]any{"js": jv})
		return
	}
	reply(r.ID, "result", map[string]any{"value": toJS(v)})
}

// reply posts {id, type, ...fields} to the page.
func reply(id int, typ string, fields map[string]any) {
	m := map[string]any{"id": id, "type": typ}
	for k, v := range fields {
		m[k] = v
	}
	post(m)
}

func post(m map[string]any) {
	js.Global().Call("postMessage", js.ValueOf(m))
}

// toJS converts a Go value to a JS value through JSON (results are small;
// bulk data such as logits travels as typed arrays instead).
func toJS(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case js.Value:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{"marshalError": err.Error()}
	}
	return js.Global().Get("JSON").Call("parse", string(b))
}

// yielder hands control back to the JS event loop now and then during long
// CPU work, so stop requests and other events get through: in wasm a busy
// goroutine never yields to JS on its own.
type yielder struct{ last time.Time }

func (y *yielder) maybe() {
	if time.Since(y.last) > 40*time.Millisecond {
		time.Sleep(time.Millisecond)
		y.last = time.Now()
	}
}

var errNoModel = errors.New("no model loaded: call load first")

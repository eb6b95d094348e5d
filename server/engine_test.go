package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/sample"
)

// sharedDir is ../shared beside the repository root.
func sharedDir() string { return filepath.Join("..", "..", "shared") }

// loadFixture loads a fixture model on the CPU, skipping when it is absent
// or this build cannot load it.
func loadFixture(t testing.TB, rel string) *engine.Engine {
	t.Helper()
	p := filepath.Join(sharedDir(), rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s absent: %v", p, err)
	}
	e, err := engine.Load(context.Background(), nil, p, engine.Options{Backend: "cpu"})
	if err != nil {
		t.Skipf("fixture %s does not load in this build: %v", p, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// chatFixture is a fixture model with a tokenizer (for text and chat), if
// this build loads one.
func chatFixture(t testing.TB) (*engine.Engine, string) {
	t.Helper()
	for _, rel := range []string{"fixtures/models/stories260K.gguf", "fixtures/models/stories260K_hf"} {
		p := filepath.Join(sharedDir(), rel)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		e, err := engine.Load(context.Background(), nil, p, engine.Options{Backend: "cpu"})
		if err != nil {
			t.Logf("%s: %v", p, err)
			continue
		}
		if e.Tokenizer == nil {
			e.Close()
			t.Logf("%s: no tokenizer", p)
			continue
		}
		t.Cleanup(func() { e.Close() })
		return e, ModelName(p)
	}
	t.Skipf("no fixture model with a tokenizer loads in this build (looked for stories260K under %s/fixtures/models)", sharedDir())
	return nil, ""
}

// engineRef is the engine's own output for req, run directly.
func engineRef(t testing.TB, e *engine.Engine, req GenRequest) *Result {
	t.Helper()
	er, err := EngineRequest(e, req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Generate(context.Background(), er, nil)
	if err != nil {
		t.Fatalf("direct generate: %v", err)
	}
	return &Result{IDs: res.IDs, Text: res.Text, PromptTokens: res.PromptTokens, FinishReason: res.FinishReason}
}

// nopClose keeps the test's engine open when the server closes its models.
type nopClose struct{ Model }

func (nopClose) Close() error { return nil }

func TestEngineGreedyIDs(t *testing.T) {
	e := loadFixture(t, "fixtures/tiny/llama")
	ts := startServer(t, Config{}, map[string]Model{"llama": nopClose{FromEngine(e)}})
	req := GenRequest{IDs: []int{1, 17, 42, 99, 7}, MaxTokens: 12}
	want := engineRef(t, e, req)

	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []int
	res, err := c.Generate(context.Background(), generateMsg("", req), func(tk Token) error { ids = append(ids, tk.ID); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, want.IDs) || !slices.Equal(res.IDs, want.IDs) || res.FinishReason != want.FinishReason {
		t.Errorf("websocket: %v (%s), engine: %v (%s)", ids, res.FinishReason, want.IDs, want.FinishReason)
	}
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", map[string]any{"prompt": req.IDs, "max_tokens": 12, "temperature": 0})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	var out struct{ Usage usage }
	jsonUnmarshal(t, data, &out)
	if out.Usage.CompletionTokens != len(want.IDs) || out.Usage.PromptTokens != len(req.IDs) {
		t.Errorf("HTTP usage %+v, engine generated %d", out.Usage, len(want.IDs))
	}
}

func TestEngineGreedyText(t *testing.T) {
	e, name := chatFixture(t)
	ts := startServer(t, Config{}, map[string]Model{name: nopClose{FromEngine(e)}})
	want := engineRef(t, e, GenRequest{Prompt: "Once upon a time", MaxTokens: 32})
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", map[string]any{"model": name, "prompt": "Once upon a time", "max_tokens": 32, "temperature": 0})
	if resp.StatusCode != 200 || data2text(t, data) != want.Text {
		t.Errorf("completions: %d %s, engine %q", resp.StatusCode, data, want.Text)
	}
	text, _, _ := streamText(t, ts.URL+"/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0, "stream": true}, false)
	if text != want.Text {
		t.Errorf("completions stream %q, engine %q", text, want.Text)
	}
	msgs := []ChatMessage{{"user", "Tell me a story."}}
	want = engineRef(t, e, GenRequest{Messages: msgs, MaxTokens: 32})
	resp, data = postJSON(t, ts.URL+"/v1/chat/completions", "", map[string]any{"messages": msgs, "max_tokens": 32, "temperature": 0})
	if resp.StatusCode != 200 || data2text(t, data) != want.Text {
		t.Errorf("chat: %d %s, engine %q", resp.StatusCode, data, want.Text)
	}
	text, _, _ = streamText(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 32, "temperature": 0, "stream": true}, true)
	if text != want.Text {
		t.Errorf("chat stream %q, engine %q", text, want.Text)
	}
	// Seeded sampling is reproducible through the server too.
	sp := sample.Params{Temperature: 0.9, TopK: 40, TopP: 0.95, RepeatLastN: 64, Seed: 99}
	want = engineRef(t, e, GenRequest{Prompt: "Once upon a time", MaxTokens: 24, Sampling: sp})
	resp, data = postJSON(t, ts.URL+"/v1/completions", "", map[string]any{"prompt": "Once upon a time", "max_tokens": 24,
		"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 99})
	if resp.StatusCode != 200 || data2text(t, data) != want.Text {
		t.Errorf("seeded: %d %s, engine %q", resp.StatusCode, data, want.Text)
	}
}

func TestEngineLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	e := loadFixture(t, "fixtures/tiny/llama")
	before := runtime.NumGoroutine()
	ts := startServer(t, Config{MaxActive: 256}, map[string]Model{"llama": nopClose{FromEngine(e)}})
	vocab := e.Model.Arch.Vocab
	prompt := func(i int) []int { return []int{1, 3 + i%(vocab-3), 3 + (7*i+5)%(vocab-3), 3 + (13*i+1)%(vocab-3)} }
	const maxTok = 24
	st := runLoad(t, ts, loadSpec{
		nWS: 100, nSSE: 20,
		wsReq: func(i int) GenRequest { return GenRequest{IDs: prompt(i), MaxTokens: maxTok, IgnoreEOS: true} },
		sseBody: func(i int) (map[string]any, GenRequest) {
			ids := prompt(1000 + i)
			return map[string]any{"prompt": ids, "max_tokens": maxTok, "temperature": 0, "ignore_eos": true, "stream": true,
				"stream_options": map[string]any{"include_usage": true}}, GenRequest{IDs: ids, MaxTokens: maxTok, IgnoreEOS: true}
		},
		ref: func(g GenRequest) *Result { return engineRef(t, e, g) },
	})
	st.report(t, fmt.Sprintf("tiny llama fixture, %s backend, %d tokens/stream", e.BackendName(), maxTok))
	ts.shutdown(t)
	checkGoroutines(t, before)
}

func TestEngineLoadText(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	e, name := chatFixture(t)
	ts := startServer(t, Config{MaxActive: 256}, map[string]Model{name: nopClose{FromEngine(e)}})
	st := runLoad(t, ts, loadSpec{
		nWS: 100, nSSE: 20,
		wsReq: func(i int) GenRequest {
			return GenRequest{Prompt: fmt.Sprintf("Once upon a time %d", i), MaxTokens: 24}
		},
		sseBody: func(i int) (map[string]any, GenRequest) {
			p := fmt.Sprintf("A little dog %d", i)
			return map[string]any{"prompt": p, "max_tokens": 24, "temperature": 0, "stream": true,
				"stream_options": map[string]any{"include_usage": true}}, GenRequest{Prompt: p, MaxTokens: 24}
		},
		ref: func(g GenRequest) *Result { return engineRef(t, e, g) },
	})
	st.report(t, fmt.Sprintf("%s, %s backend, 24 tokens/stream", name, e.BackendName()))
}

// TestOpenAINpmClient: the official openai npm client talks to cortiq
// serve: non-streaming and streaming chat completions on a fixture model,
// greedy output equal to the engine's (cortiq run --temp 0).
func TestOpenAINpmClient(t *testing.T) {
	npmClientDir(t)
	e, name := chatFixture(t)
	const token = "npm-test-token"
	ts := startServer(t, Config{Token: token}, map[string]Model{name: nopClose{FromEngine(e)}})
	got := runNpmClient(t, ts, name, token)
	msgs := []ChatMessage{{"user", "Tell me a story."}}
	want := engineRef(t, e, GenRequest{Messages: msgs, MaxTokens: 32})
	if got.Chat != want.Text || got.Stream != want.Text {
		t.Errorf("openai client chat %q, stream %q; engine greedy %q", got.Chat, got.Stream, want.Text)
	}
	if got.Usage.CompletionTokens != len(want.IDs) || got.ChatFinish != finishReason(want.FinishReason) {
		t.Errorf("usage %+v finish %q; engine generated %d (%s)", got.Usage, got.ChatFinish, len(want.IDs), want.FinishReason)
	}
	if wc := engineRef(t, e, GenRequest{Prompt: "Once upon a time", MaxTokens: 32}); got.Completion != wc.Text {
		t.Errorf("openai client completion %q, engine %q", got.Completion, wc.Text)
	}
}

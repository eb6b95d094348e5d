package engine

import (
	"context"
	"github.com/cortiq/cortiq/fixtures"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/resolve"
)

const storiesText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said"

func TestStories260KGreedyText(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, path, Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids, err := e.Encode("Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 403, 407, 261, 378}; !equal(ids, want) {
		t.Fatalf("prompt ids %v, want %v", ids, want)
	}
	var streamed strings.Builder
	res, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 64}, func(tok Token) error {
		streamed.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := "Once upon a time" + res.Text; got != storiesText {
		t.Fatalf("greedy text\n got %q\nwant %q", got, storiesText)
	}
	if streamed.String() != res.Text {
		t.Fatalf("streamed %q != final %q", streamed.String(), res.Text)
	}
	if len(res.IDs) != 64 || res.Backend != "cpu" {
		t.Fatalf("%d ids on %s", len(res.IDs), res.Backend)
	}
}

func TestGreedyBatchOnCPU(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, path, Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 64, GreedyBatch: 7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := "Once upon a time" + res.Text; got != storiesText || len(res.IDs) != 64 {
		t.Fatalf("greedy batch text %q (%d ids)", got, len(res.IDs))
	}
}

func TestStopStrings(t *testing.T) {
	m2 := NewStopMatcher([]string{"STOP"})
	var o2 strings.Builder
	stoppedAt := -1
	for i, p := range []string{"hello S", "T", "OP and more"} {
		emit, stopped := m2.Push(p)
		o2.WriteString(emit)
		if stopped {
			stoppedAt = i
			break
		}
	}
	if o2.String() != "hello " || stoppedAt != 2 {
		t.Fatalf("got %q stopped at %d", o2.String(), stoppedAt)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMaxTokensClampedToContext: a max_tokens near the int limit is
// clamped to the room left in the context (no overflow past the clamp),
// and the generation ends with "length" and its tokens, not an error.
func TestMaxTokensClampedToContext(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, path, Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, n := range []int{math.MaxInt, math.MaxInt - 3, 1 << 62} {
		res, err := e.Generate(context.Background(), Request{IDs: []int{1, 403, 407}, MaxTokens: n, MaxContext: 20, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatalf("max_tokens %d: %v", n, err)
		}
		if len(res.IDs) != 17 || res.FinishReason != "length" {
			t.Fatalf("max_tokens %d: %d tokens, finish %q; want 17, length", n, len(res.IDs), res.FinishReason)
		}
	}
}

// TestContextSizeChecked: negative and absurd context sizes are refused
// with an error naming the limit, at load and per request.
func TestContextSizeChecked(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	for _, n := range []int{-1, 1e12} {
		e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, path, Options{Backend: "cpu", MaxContext: n})
		if err == nil {
			e.Close()
			t.Fatalf("context %d accepted at load", n)
		}
		if !strings.Contains(err.Error(), "context size") {
			t.Fatalf("context %d: error %q does not name the context size", n, err)
		}
	}
	e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, path, Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, n := range []int{-1, 1e12} {
		if _, err := e.Generate(context.Background(), Request{IDs: []int{1}, MaxTokens: 1, MaxContext: n}, nil); err == nil || !strings.Contains(err.Error(), "context size") {
			t.Fatalf("request context %d: error %v", n, err)
		}
	}
}

// A context whose CPU session does not fit MemBudget is refused at load and
// per request, with what it needs; an unknown KV element is refused.
func TestMemBudget(t *testing.T) {
	m, err := importer.FromHF(filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "gemma2_sw8"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := NewFromModel(m, Options{Backend: "cpu", MaxContext: 4096, MemBudget: 1 << 20}); err == nil || !strings.Contains(err.Error(), "needs") {
		t.Fatalf("a 1 MiB budget for 4096 positions: %v", err)
	}
	if _, err := NewFromModel(m, Options{Backend: "cpu", KV: "f8"}); err == nil {
		t.Fatal("KV f8 accepted")
	}
	e, err := NewFromModel(m, Options{Backend: "cpu", MaxContext: 64, MemBudget: 64 << 20, KV: "f16"})
	if err != nil {
		t.Fatal(err)
	}
	e.owned = false
	if _, err := e.Generate(context.Background(), Request{IDs: []int{1, 2}, MaxTokens: 2, MaxContext: 4096}, nil); err != nil {
		t.Fatalf("4096 positions within 64 MiB: %v", err)
	}
	e.opts.MemBudget = 1 << 20
	if _, err := e.Generate(context.Background(), Request{IDs: []int{1, 2}, MaxTokens: 2, MaxContext: 4096}, nil); err == nil || !strings.Contains(err.Error(), "needs") {
		t.Fatalf("a request of 4096 positions beyond the budget: %v", err)
	}
}

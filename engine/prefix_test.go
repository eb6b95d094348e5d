//go:build !js

package engine

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/resolve"
)

func loadCached(t *testing.T, arch, backend string, bytes int64) *Engine {
	t.Helper()
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", arch)
	e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, Options{Backend: backend, PrefixCacheBytes: bytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestPrefixReuse: the second turn of a conversation prefills only its new
// tokens, and its logits equal, bit for bit, those of a fresh session fed
// the same positions in the same steps (and a one-pass cold prefill within
// the parity tolerance); a prompt that diverges from the kept one rewinds
// to the shared prefix (within the rewind depth for recurrent layers); the
// generated tokens equal a cold run's.
func TestPrefixReuse(t *testing.T) {
	ctx := context.Background()
	for _, arch := range []string{"llama", "gemma2_sw8", "qwen3_moe", "lfm2", "qwen3_next"} {
		t.Run(arch, func(t *testing.T) {
			e := loadCached(t, arch, "cpu", 1<<30)
			cold := loadCached(t, arch, "cpu", 0)
			vocab := e.Model.Arch.Vocab
			p1 := specPrompt(vocab)[:10]
			r1, err := e.Generate(ctx, Request{IDs: p1, MaxTokens: 6, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r1.CachedTokens != 0 {
				t.Errorf("first turn reused %d tokens", r1.CachedTokens)
			}
			p2 := slices.Concat(p1, r1.IDs, []int{9, 4, 77})
			// The session kept holds p1 and the first 5 picks (the last
			// pick was never consumed).
			held := len(p1) + len(r1.IDs) - 1
			s, n, err := e.acquire(p2, e.maxContext(), "")
			if err != nil {
				t.Fatal(err)
			}
			if n != held {
				t.Fatalf("reused %d tokens, want %d", n, held)
			}
			got, err := s.prefill(p2[n:])
			if err != nil {
				t.Fatal(err)
			}
			e.release(s, true)
			// A fresh session fed as the first turn was, then the rest.
			f, err := cold.newSession(cold.maxContext(), "")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			want, err := f.Forward(p1, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range r1.IDs[:len(r1.IDs)-1] {
				if want, err = f.Forward([]int{id}, false); err != nil {
					t.Fatal(err)
				}
			}
			if want, err = f.Forward(p2[n:], false); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(got, want); d != 0 {
				t.Errorf("reused-prefix logits differ from a fresh session fed the same steps by %g", d)
			}
			one, err := cold.Logits(ctx, p2)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(got, one[len(one)-vocab:]); d > 1e-4 {
				t.Errorf("reused-prefix logits differ from a one-pass cold prefill by %g", d)
			}

			// The next turn through Generate: the same tokens as cold.
			r2, err := e.Generate(ctx, Request{IDs: p2, MaxTokens: 6, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := cold.Generate(ctx, Request{IDs: p2, MaxTokens: 6, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r2.CachedTokens != len(p2)-1 || !slices.Equal(r2.IDs, c2.IDs) {
				t.Errorf("second turn: %d cached, ids %v; cold %v", r2.CachedTokens, r2.IDs, c2.IDs)
			}
			// A prompt diverging 2 tokens before the kept session's end:
			// a rewind of 2, within every depth.
			hist := slices.Concat(p2, r2.IDs[:len(r2.IDs)-1])
			p3 := slices.Concat(hist[:len(hist)-2], []int{11, 12})
			r3, err := e.Generate(ctx, Request{IDs: p3, MaxTokens: 4, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			c3, err := cold.Generate(ctx, Request{IDs: p3, MaxTokens: 4, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r3.CachedTokens != len(hist)-2 || !slices.Equal(r3.IDs, c3.IDs) {
				t.Errorf("diverging turn: %d cached (want %d), ids %v; cold %v", r3.CachedTokens, len(hist)-2, r3.IDs, c3.IDs)
			}
		})
	}
}

// TestPrefixCacheBudget: past its byte budget the cache closes the least
// recently used sessions; a request on another backend or context length
// does not take a session it cannot use.
func TestPrefixCacheBudget(t *testing.T) {
	ctx := context.Background()
	e := loadCached(t, "llama", "cpu", 1)
	if _, err := e.Generate(ctx, Request{IDs: []int{1, 2, 3}, MaxTokens: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(e.prefix.entries); n != 0 {
		t.Errorf("%d sessions kept within a 1-byte budget", n)
	}
	e = loadCached(t, "llama", "cpu", 1<<30)
	for _, p := range [][]int{{1, 2, 3}, {4, 5, 6}} {
		if _, err := e.Generate(ctx, Request{IDs: p, MaxTokens: 2}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.prefix.entries); n != 2 {
		t.Errorf("%d sessions kept, want 2", n)
	}
	r, err := e.Generate(ctx, Request{IDs: []int{1, 2, 3, 9}, MaxTokens: 2, MaxContext: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.CachedTokens != 0 {
		t.Errorf("a session of another context length was reused (%d tokens)", r.CachedTokens)
	}
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > m || math.IsNaN(d) {
			m = d
		}
	}
	return m
}

// TestPrefixReuseDevice: the second turn on the device (lavapipe here)
// reuses the kept session and generates the cold run's tokens.
func TestPrefixReuseDevice(t *testing.T) {
	needAdapter(t)
	ctx := context.Background()
	for _, arch := range []string{"llama", "lfm2", "qwen3_next"} {
		t.Run(arch, func(t *testing.T) {
			e := loadCached(t, arch, "webgpu", 1<<30)
			if e.dev == nil {
				t.Skipf("no device backend: %v", e.DeviceError())
			}
			cold := loadCached(t, arch, "webgpu", 0)
			p1 := specPrompt(e.Model.Arch.Vocab)[:10]
			r1, err := e.Generate(ctx, Request{IDs: p1, MaxTokens: 6, IgnoreEOS: true, GreedyBatch: 3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p2 := slices.Concat(p1, r1.IDs[:4], []int{9, 4, 77})
			r2, err := e.Generate(ctx, Request{IDs: p2, MaxTokens: 6, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := cold.Generate(ctx, Request{IDs: p2, MaxTokens: 6, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r2.CachedTokens != len(p1)+4 || !slices.Equal(r2.IDs, c2.IDs) || r2.Backend != c2.Backend {
				t.Errorf("second turn: %d cached (want %d), ids %v on %s; cold %v on %s", r2.CachedTokens, len(p1)+4, r2.IDs, r2.Backend, c2.IDs, c2.Backend)
			}
		})
	}
}

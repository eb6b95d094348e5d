package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/writer"
)

// storiesText is the greedy continuation of "Once upon a time" by
// stories260K, word for word (../shared/README.md).
const storiesText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said"

// TestStoriesGreedy: stories260K served by the server package, greedy 64
// tokens equal the known text, on WebGPU (SwiftShader, --enable-unsafe-webgpu)
// and on the CPU engine (Chromium without the flag, so no adapter).
func TestStoriesGreedy(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	for _, c := range []struct {
		name   string
		webgpu bool
	}{{"webgpu", true}, {"cpu", false}} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, map[string]string{"stories260K": gguf})
			b := newBrowser(t, c.webgpu, "")
			b.open(srv.url() + "/")
			info := b.mustLoad("stories260K", "", 2*time.Minute)
			t.Logf("load: backend %s (device error %q) in %.2fs, heap peak +%.1f MiB over %.1f MiB",
				info.Backend, info.DeviceError, info.LoadSeconds, info.Heap.PeakAbove/(1<<20), info.Heap.Baseline/(1<<20))
			if c.webgpu && !strings.HasPrefix(info.Backend, "webgpu") {
				t.Fatalf("backend %q with --enable-unsafe-webgpu, want webgpu (device error: %s)", info.Backend, info.DeviceError)
			}
			if !c.webgpu && (info.Backend != "cpu" || info.DeviceError == "") {
				t.Fatalf("without WebGPU: backend %q, device error %q; want cpu with the reason", info.Backend, info.DeviceError)
			}
			res := b.generate(map[string]any{"prompt": "Once upon a time", "maxTokens": 64, "temperature": 0, "backend": c.name}, 3*time.Minute)
			t.Logf("%s: prefill %.1f tok/s, decode %.1f tok/s", res.Backend, res.PrefillTokS, res.DecodeTokS)
			if got := "Once upon a time" + res.Text; got != storiesText {
				t.Errorf("greedy text on %s:\n got %q\nwant %q", res.Backend, got, storiesText)
			}
			if len(res.IDs) != 64 {
				t.Errorf("%d tokens, want 64 (finish %s)", len(res.IDs), res.FinishReason)
			}
			if want := []int{1, 403, 407, 261, 378}; !equalInts(res.PromptIDs, want) {
				t.Errorf("prompt ids %v, want %v", res.PromptIDs, want)
			}
			if c.webgpu != strings.HasPrefix(res.Backend, "webgpu") {
				t.Errorf("generation ran on %q", res.Backend)
			}
			// The page keeps the session (prefix reuse): the same prompt
			// again reuses its positions and decodes the same text.
			again := b.generate(map[string]any{"prompt": "Once upon a time", "maxTokens": 64, "temperature": 0, "backend": c.name}, 3*time.Minute)
			if again.CachedTokens == 0 || again.Text != res.Text {
				t.Errorf("second generate: %d cached prompt tokens, text equal %v", again.CachedTokens, again.Text == res.Text)
			}
			if c.webgpu {
				return
			}
			// Chat turns go through the model's template (ChatML here, as
			// stories260K ships none) and stream like any prompt.
			chat := b.generate(map[string]any{"messages": []map[string]string{{"role": "user", "content": "Tell me a story."}},
				"maxTokens": 8, "temperature": 0.8, "topK": 40, "topP": 0.95, "seed": 7}, time.Minute)
			if len(chat.IDs) == 0 || chat.FinishReason == "" {
				t.Errorf("chat generate: %+v", chat)
			}
		})
	}
}

func equalInts(a, b []int) bool {
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

// TestFormats: the same model as a GGUF URL and as a CMF file (written here
// with writer.SaveCMF) loads by URL and greedy-decodes the known text on
// the CPU engine.
func TestFormats(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	dir := t.TempDir()
	m, err := importer.Open(context.Background(), gguf)
	if err != nil {
		t.Fatal(err)
	}
	cmfPath := filepath.Join(dir, "stories260K.cmf")
	err = writer.SaveCMF(m, cmfPath, writer.SaveOptions{Keep: true})
	if m.Close != nil {
		m.Close()
	}
	if err != nil {
		t.Fatalf("SaveCMF: %v", err)
	}
	srv := newServer(t, map[string]string{"g": gguf, "c": cmfPath})
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/")
	for _, u := range []string{srv.url() + "/models/g/stories260K.gguf", "/models/c/stories260K.cmf"} {
		info := b.mustLoad(u, "", time.Minute)
		res := b.generate(map[string]any{"prompt": "Once upon a time", "maxTokens": 64, "temperature": 0}, 2*time.Minute)
		if got := "Once upon a time" + res.Text; got != storiesText {
			t.Errorf("%s: greedy text %q", u, got)
		}
		t.Logf("%s: %s, %d bytes, verified by %s", u, info.Family, info.Files[0].Size, info.Files[0].Verified)
	}
}

package e2e

import (
	"strings"
	"testing"
	"time"
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

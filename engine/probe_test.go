//go:build !js

package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/probe"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/webgpu"
)

// TestAutoProbe: with --backend auto the engine times the device against
// the CPU and keeps the faster. On a software adapter and a tiny model the
// CPU wins decode by far: the device, out, is closed at once and the other
// classes are not raced (nothing left to race the CPU against; the fakes
// of probe_race_test.go cover them). The verdict is cached, so the next
// load opens no device at all, and --backend webgpu still forces it.
func TestAutoProbe(t *testing.T) {
	needAdapter(t)
	cache := filepath.Join(t.TempDir(), "probe.json")
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama")
	noProbe := false
	load := func(backend string) *Engine {
		// AllowSoftware: the probe runs on a software adapter.
		e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, Options{Backend: backend, ProbeCache: cache, AllowSoftware: true, NoProbe: noProbe})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	e := load("auto")
	if e.dev != nil || e.DeviceError() != nil || !strings.Contains(e.BackendReason(), "measured just now") {
		t.Fatalf("auto on a software adapter: device kept %v, reason %q, device error %v; want the CPU, measured, and no device error", e.dev != nil, e.BackendReason(), e.DeviceError())
	}
	data, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := probe.ParseCache(data)
	if err != nil {
		t.Fatal(err)
	}
	// The decode verdict, the CPU's on a software adapter.
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Class, "decode llama ") || entries[0].Winner != "cpu" ||
		len(entries[0].Arms) != 2 || entries[0].Arms[1] != "cpu" || !strings.HasPrefix(entries[0].Arms[0], "webgpu:") {
		t.Fatalf("cached verdicts %+v, want the CPU's for decode of llama", entries)
	}
	if v := e.ProbeVerdicts(); len(v) != 1 || v[0].Cached || v[0].Winner != "cpu" || len(v[0].Best) != 2 || v[0].Best[1] == 0 {
		t.Errorf("ProbeVerdicts %+v, want decode measured, the CPU winning", v)
	}
	t.Logf("verdict: %v", e.BackendReason())
	// The next load names the adapter (backend.Identify) and, the CPU
	// having won, opens no device.
	opened := 0
	webgpu.OnOpen = func(*gpu.Device) { opened++ }
	defer func() { webgpu.OnOpen = nil }()
	if e := load("auto"); e.dev != nil || e.DeviceError() != nil || !strings.Contains(e.BackendReason(), "earlier load") || opened != 0 {
		t.Errorf("second load: device kept %v, %d devices opened, reason %q, device error %v; want the cached verdict and no device", e.dev != nil, opened, e.BackendReason(), e.DeviceError())
	} else if v := e.ProbeVerdicts(); len(v) != 1 || !v[0].Cached {
		t.Errorf("second load measured again: %+v", v)
	}
	if e := load("webgpu"); e.dev == nil {
		t.Errorf("--backend webgpu: %v; want the device regardless of the verdict", e.DeviceError())
	}
	noProbe = true
	if e := load("auto"); e.dev == nil {
		t.Errorf("NoProbe: %v; want the device kept without a probe", e.DeviceError())
	}
}

// TestPipelinedGreedyStops: on the device the next greedy batch is already
// running when a stop string or the length limit ends the generation; the
// text and ids must still be exactly the CPU's, for batches of 1 and 5.
func TestPipelinedGreedyStops(t *testing.T) {
	needAdapter(t)
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	load := func(backend string) *Engine { return loadEngine(t, path, backend) }
	cpu, dev := load("cpu"), load("webgpu")
	if dev.dev == nil {
		t.Fatalf("device refused: %v", dev.DeviceError())
	}
	for _, req := range []Request{
		{Prompt: "Once upon a time", MaxTokens: 40, Stop: []string{"park"}},
		{Prompt: "Once upon a time", MaxTokens: 40, Stop: []string{"park"}, GreedyBatch: 5},
		{Prompt: "Once upon a time", MaxTokens: 23, GreedyBatch: 5},
		{Prompt: "Once upon a time", MaxTokens: 1},
	} {
		want, err := cpu.Generate(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		var streamed strings.Builder
		got, err := dev.Generate(context.Background(), req, func(tok Token) error {
			streamed.WriteString(tok.Text)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Text != want.Text || !equal(got.IDs, want.IDs) || got.FinishReason != want.FinishReason || streamed.String() != got.Text {
			t.Errorf("%+v on %s: %q %v (%s), streamed %q; CPU %q %v (%s)", req, got.Backend, got.Text, got.IDs, got.FinishReason,
				streamed.String(), want.Text, want.IDs, want.FinishReason)
		}
		if got.DeviceError != "" {
			t.Errorf("%+v: device error %s", req, got.DeviceError)
		}
	}
}

// needAdapter skips the test when no WebGPU adapter opens.
func needAdapter(t *testing.T) {
	t.Helper()
	d, err := gpu.Open(gpu.Options{})
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	d.Close()
}

// loadEngine loads the model at path with the given backend, closed when
// the test ends.
func loadEngine(t *testing.T, path, backend string) *Engine {
	t.Helper()
	e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, path, Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

//go:build !js

package engine

import (
	"context"
	"fmt"
	"github.com/cortiq/cortiq/fixtures"
	"math"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/sample"
)

// TestCPUPrefillDeviceDecode: a prompt prefilled on the CPU and decoded on
// the device, with the KV cache and recurrent state carried over, gives the
// greedy tokens of a pure CPU run and of a pure device run, and the
// device's first decode logits match the CPU's (issue 7, acceptance 2).
func TestCPUPrefillDeviceDecode(t *testing.T) {
	for _, arch := range []string{"qwen2_moe", "qwen3_moe", "mixtral", "lfm2", "qwen3_next", "llama", "gemma2_sw8"} {
		t.Run(arch, func(t *testing.T) {
			dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", arch)
			load := func(opts Options) *Engine {
				e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, opts)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			dev := load(Options{Backend: "webgpu", PrefillOnCPU: true})
			defer dev.Close()
			if dev.dev == nil {
				t.Skipf("no WebGPU adapter: %v", dev.DeviceError())
			}
			vocab := dev.Model.Arch.Vocab
			var ids []int
			for _, x := range []int{5, 17, 33, 101, 7, 250, 64, 3, 99, 12, 180, 41} {
				ids = append(ids, x%vocab)
			}
			req := Request{IDs: ids, MaxTokens: 12, IgnoreEOS: true}

			cpuE := load(Options{Backend: "cpu"})
			want, err := cpuE.Generate(context.Background(), req, nil)
			cpuE.Close()
			if err != nil {
				t.Fatal(err)
			}
			pure := load(Options{Backend: "webgpu"})
			pureRes, err := pure.Generate(context.Background(), req, nil)
			pure.Close()
			if err != nil {
				t.Fatal(err)
			}
			got, err := dev.Generate(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Backend == "cpu" || got.DeviceError != "" {
				t.Fatalf("generation ran on %s (%s)", got.Backend, got.DeviceError)
			}
			if fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) {
				t.Errorf("CPU prefill → device decode %v, pure CPU %v", got.IDs, want.IDs)
			}
			if fmt.Sprint(pureRes.IDs) != fmt.Sprint(want.IDs) {
				t.Errorf("pure device %v, pure CPU %v", pureRes.IDs, want.IDs)
			}
			batched := req
			batched.GreedyBatch = 4
			if got, err := dev.Generate(context.Background(), batched, nil); err != nil || fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) {
				t.Errorf("CPU prefill → device greedy batches %v (%v), pure CPU %v", got.IDs, err, want.IDs)
			}

			// The state really moved: the device's first decode logits
			// after an import equal the CPU's.
			cs, err := dev.cpu.NewSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			l0, err := cs.Forward(ids, false)
			if err != nil {
				t.Fatal(err)
			}
			st, err := cs.(backend.StateExporter).ExportState()
			if err != nil {
				t.Fatal(err)
			}
			next := sample.Argmax(l0)
			wantL, err := cs.Forward([]int{next}, false)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := dev.dev.NewSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if err := ds.(backend.StateImporter).ImportState(st); err != nil {
				t.Fatal(err)
			}
			if ds.Len() != len(ids) {
				t.Fatalf("device session at %d after import, want %d", ds.Len(), len(ids))
			}
			gotL, err := ds.Forward([]int{next}, false)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for i := range wantL {
				worst = max(worst, math.Abs(float64(gotL[i]-wantL[i])))
			}
			t.Logf("%s: tokens %v; first decode max |Δlogit| %.2g", arch, got.IDs, worst)
			if worst > 2e-3 {
				t.Errorf("first decode logits differ by %.3g (> 2e-3)", worst)
			}
		})
	}
}

// TestCPUPrefillReplayFallback: a device session that cannot take the
// CPU's state (layers on the host) replays the prompt on the device, and
// the generation still gives the pure CPU tokens.
func TestCPUPrefillReplayFallback(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama")
	load := func(opts Options) *Engine {
		e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := load(Options{Backend: "webgpu", GPULayers: "0", PrefillOnCPU: true})
	defer e.Close()
	if e.dev == nil {
		t.Skipf("no WebGPU adapter: %v", e.DeviceError())
	}
	ids := []int{5, 17, 33, 101, 7, 250, 64, 3}
	cpuE := load(Options{Backend: "cpu"})
	want, err := cpuE.Generate(context.Background(), Request{IDs: ids, MaxTokens: 10, IgnoreEOS: true}, nil)
	cpuE.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.newSession(64, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logits, err := s.prefill(ids)
	if err != nil {
		t.Fatal(err)
	}
	if s.prefillErr == nil || !s.onDevice || len(s.history) != len(ids) {
		t.Fatalf("prefill: import error %v, on device %v, history %d", s.prefillErr, s.onDevice, len(s.history))
	}
	got := []int{sample.Argmax(logits)}
	for len(got) < 10 {
		l, err := s.Forward(got[len(got)-1:], false)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, sample.Argmax(l))
	}
	if fmt.Sprint(got) != fmt.Sprint(want.IDs) {
		t.Fatalf("after replay %v, pure CPU %v", got, want.IDs)
	}
}

// TestCPUPrefillLongPrompt carries a prompt long enough for the device's
// split-K attention over the imported cache.
func TestCPUPrefillLongPrompt(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama")
	load := func(opts Options) *Engine {
		e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := load(Options{Backend: "webgpu", PrefillOnCPU: true, MaxContext: 1024})
	defer e.Close()
	if e.dev == nil {
		t.Skipf("no WebGPU adapter: %v", e.DeviceError())
	}
	ids := make([]int, 600)
	for i := range ids {
		ids[i] = (i*37 + 11) % e.Model.Arch.Vocab
	}
	req := Request{IDs: ids, MaxTokens: 8, IgnoreEOS: true}
	cpuE := load(Options{Backend: "cpu", MaxContext: 1024})
	want, err := cpuE.Generate(context.Background(), req, nil)
	cpuE.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Backend == "cpu" || fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) {
		t.Fatalf("CPU prefill → device decode %v on %s, pure CPU %v", got.IDs, got.Backend, want.IDs)
	}
}

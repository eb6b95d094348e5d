//go:build !js

package engine

import (
	"context"
	"fmt"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/gpu"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/webgpu"
)

// TestDeviceFaultsFallBack injects a failure at each point of the device
// path — pipeline build, submit, readback, a lost device — during a
// generation: the generation must continue on the CPU with exactly the
// tokens of a pure CPU run (issue 4, acceptance 3).
func TestDeviceFaultsFallBack(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "qwen3")
	load := func(backend string) *Engine {
		e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, Options{Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ids := []int{5, 17, 33, 101, 7, 250, 64, 3}
	cpuE := load("cpu")
	want, err := cpuE.Generate(context.Background(), Request{IDs: ids, MaxTokens: 16, IgnoreEOS: true}, nil)
	cpuE.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, fault := range []string{"pipeline-build", "submit", "readback", "lose-device", "submit-greedy"} {
		t.Run(fault, func(t *testing.T) {
			if fault == "pipeline-build" {
				webgpu.OnOpen = func(d *gpu.Device) { d.Faults.PipelineBuild.Store(true) }
				defer func() { webgpu.OnOpen = nil }()
			}
			e := load("webgpu")
			defer e.Close()
			db, ok := e.dev.(*webgpu.Backend)
			if !ok {
				if fault == "pipeline-build" && e.DeviceError() != nil {
					// Refused at load: the whole run is on the CPU.
					got, err := e.Generate(context.Background(), Request{IDs: ids, MaxTokens: 16, IgnoreEOS: true}, nil)
					if err != nil || fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) || got.Backend != "cpu" {
						t.Fatalf("got %v on %s (%v), want %v", got.IDs, got.Backend, err, want.IDs)
					}
					return
				}
				t.Skipf("no WebGPU adapter: %v", e.DeviceError())
			}
			req := Request{IDs: ids, MaxTokens: 16, IgnoreEOS: true}
			if fault == "submit-greedy" {
				req.GreedyBatch = 4
			}
			n := 0
			got, err := e.Generate(context.Background(), req, func(Token) error {
				n++
				if n == 5 {
					switch fault {
					case "submit", "submit-greedy":
						db.Device().Faults.Submit.Store(true)
					case "readback":
						db.Device().Faults.Readback.Store(true)
					case "lose-device":
						db.Device().Faults.LoseDevice.Store(true)
					case "pipeline-build":
						db.Device().Faults.PipelineBuild.Store(true)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) {
				t.Fatalf("after a %s fault: %v, want the CPU run's %v", fault, got.IDs, want.IDs)
			}
			if fault != "pipeline-build" && (got.Backend != "cpu" || got.FallbackOps == 0) {
				t.Errorf("after a %s fault the run ended on %s with %d fallbacks", fault, got.Backend, got.FallbackOps)
			}
		})
	}
}

// TestBudgetSplit: a VRAM budget smaller than the model puts a layer
// prefix on the device and the rest on the CPU, with the CPU run's tokens
// (issue 4, acceptance 4); so does CORTIQ_GPU_LAYERS-style selection.
func TestBudgetSplit(t *testing.T) {
	dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "gemma3_text_sw8")
	ids := []int{5, 17, 33, 101, 7, 250, 64, 3, 9, 12, 40}
	run := func(o Options) *Result {
		e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if o.Backend == "webgpu" && e.dev == nil {
			if _, err := gpu.Open(gpu.Options{}); err != nil {
				t.Skipf("no WebGPU adapter: %v", err)
			}
			t.Fatalf("%+v: device refused: %v", o, e.DeviceError())
		}
		res, err := e.Generate(context.Background(), Request{IDs: ids, MaxTokens: 12, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := run(Options{Backend: "cpu"})
	for _, o := range []Options{
		{Backend: "webgpu", VRAMBudget: 150 << 10},
		{Backend: "webgpu", GPULayers: "0,2"},
		{Backend: "webgpu", GPULayers: "1-3"},
	} {
		got := run(o)
		if fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) {
			t.Errorf("%+v: %v, want %v", o, got.IDs, want.IDs)
		}
		if got.FallbackOps == 0 {
			t.Errorf("%+v: no layer ran on the CPU (budget or ranges ignored?)", o)
		}
		if !strings.HasPrefix(got.Backend, "webgpu:") {
			t.Errorf("%+v: the device failed and the CPU took over: %s", o, got.DeviceError)
		}
		t.Logf("%+v: backend %s, host layer runs %d, resident %d bytes", o, got.Backend, got.FallbackOps, got.ResidentBytes)
	}
}

// TestDevicePrefillCPUDecode: for the MoE and hybrid families (recurrent
// conv and DeltaNet state, routed experts), a device prefill followed by a
// forced move to the CPU for the decode gives the pure CPU run's tokens
// (issue 7, acceptance 2, device → CPU direction).
func TestDevicePrefillCPUDecode(t *testing.T) {
	ids := []int{5, 17, 33, 101, 7, 250, 64, 3, 9, 12}
	for _, arch := range []string{"qwen2_moe", "qwen3_moe", "mixtral", "lfm2", "qwen3_next"} {
		t.Run(arch, func(t *testing.T) {
			dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", arch)
			load := func(backend string) *Engine {
				e, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, dir, Options{Backend: backend})
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			cpuE := load("cpu")
			want, err := cpuE.Generate(context.Background(), Request{IDs: ids, MaxTokens: 12, IgnoreEOS: true}, nil)
			cpuE.Close()
			if err != nil {
				t.Fatal(err)
			}
			e := load("webgpu")
			defer e.Close()
			db, ok := e.dev.(*webgpu.Backend)
			if !ok {
				if _, err := gpu.Open(gpu.Options{}); err != nil {
					t.Skipf("no WebGPU adapter: %v", err)
				}
				t.Fatalf("device refused %s: %v", arch, e.DeviceError())
			}
			pure, err := e.Generate(context.Background(), Request{IDs: ids, MaxTokens: 12, IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(pure.Backend, "webgpu:") {
				t.Fatalf("pure device run ended on %s: %s", pure.Backend, pure.DeviceError)
			}
			got, err := e.Generate(context.Background(), Request{IDs: ids, MaxTokens: 12, IgnoreEOS: true}, func(Token) error {
				db.Device().Faults.Submit.Store(true) // the first decode step fails: the CPU replays the prefill and decodes
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got.Backend != "cpu" {
				t.Fatalf("the forced move did not happen (ended on %s)", got.Backend)
			}
			// Greedy flips are allowed only where the margins are within
			// float noise; these fixtures are compared exactly elsewhere,
			// here all three runs must agree.
			if fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) || fmt.Sprint(pure.IDs) != fmt.Sprint(want.IDs) {
				t.Fatalf("device→CPU %v, pure device %v, pure CPU %v", got.IDs, pure.IDs, want.IDs)
			}
		})
	}
}

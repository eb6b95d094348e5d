package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
)

// heapShape is qwen-0.5b's layer and FFN widths with fewer layers and a
// smaller vocabulary: a q4_0 file of about 50 MB that SwiftShader takes in a
// few seconds.
var heapShape = synth.Shape{Name: "qwen-mini", Arch: "qwen2", Hidden: 896, Layers: 4, Heads: 14, KVHeads: 2,
	FFN: 4864, Vocab: 32000, Tied: true, QKVBias: true, RopeTheta: 1000000, Context: 4096}

const heapBound = 64 << 20

// TestHeapBounded loads a synthetic q4_0 model onto WebGPU and checks that
// the wasm heap stays within 64 MiB of its baseline: tensors travel from
// OPFS to GPU buffers one at a time. CORTIQ_E2E_HEAP_MODEL names another
// GGUF file to measure instead (e.g. the full qwen-0.5b q4_0 synth); its
// numbers are logged, and the bound is checked for it too.
func TestHeapBounded(t *testing.T) {
	needBrowser(t)
	path := os.Getenv("CORTIQ_E2E_HEAP_MODEL")
	custom := path != ""
	if !custom {
		path = filepath.Join(t.TempDir(), "qwen-mini-q4_0.gguf")
		t0 := time.Now()
		if err := synth.Write(path, heapShape, tensor.Q4_0); err != nil {
			t.Fatal(err)
		}
		t.Logf("synth %s in %.1fs", heapShape.Name, time.Since(t0).Seconds())
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, map[string]string{"heap": path})
	b := newBrowser(t, true, "")
	b.open(srv.url() + "/")
	info := b.mustLoad("heap", `{backend: "webgpu"}`, 9*time.Minute)
	h := info.Heap
	t.Logf("%s (%.1f MiB) on %s in %.1fs: heap baseline %.1f MiB, %.1f MiB with metadata and tokenizer, peak %.1f MiB (+%.1f MiB), after %.1f MiB; runtime Sys peak %.1f MiB; wasm memory %.1f -> %.1f MiB (%d samples)",
		filepath.Base(path), float64(st.Size())/(1<<20), info.Backend, info.LoadSeconds,
		h.Baseline/(1<<20), h.Before/(1<<20), h.Peak/(1<<20), h.PeakAbove/(1<<20), h.Final/(1<<20), h.PeakSys/(1<<20),
		h.WasmBefore/(1<<20), h.WasmMemory/(1<<20), h.Samples)
	t.Logf("load time: fetch into OPFS %.1fs, import %.1fs, backend (GPU upload) %.1fs", info.FetchSec, info.ImportSec, info.BackendSec)
	if !strings.HasPrefix(info.Backend, "webgpu") {
		t.Fatalf("the model did not go to WebGPU: %s", info.DeviceError)
	}
	if h.PeakAbove > heapBound {
		t.Errorf("wasm heap peaked %.1f MiB above its baseline while loading, bound %d MiB", h.PeakAbove/(1<<20), heapBound>>20)
	}
	if custom {
		return
	}
	// The q4_0 model runs on the GPU (one token: SwiftShader takes tens of
	// seconds for it) and agrees with the CPU engine.
	t0 := time.Now()
	gpu := b.logits([]int{1, 2, 3}, "webgpu")
	t.Logf("3-token logits on %s in %.1fs", gpu.Backend, time.Since(t0).Seconds())
	cpu := b.logits([]int{1, 2, 3}, "cpu")
	if !strings.HasPrefix(gpu.Backend, "webgpu") || cpu.Backend != "cpu" {
		t.Fatalf("backends %s, %s", gpu.Backend, cpu.Backend)
	}
	d, _ := maxAbsDiff(gpu.Logits, cpu.Logits)
	t.Logf("q4_0 logits, WebGPU vs CPU engine: max |diff| %.2e", d)
	if d > 1e-2 {
		t.Errorf("q4_0 logits on WebGPU and CPU differ by %.3e", d)
	}
}

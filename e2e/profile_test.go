package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// gpuProfile is injected into the Worker ahead of worker.js: it records the
// dispatches of one decode step, then times each kernel alone.
const gpuProfile = `
(() => {
  const csm = GPUDevice.prototype.createShaderModule;
  GPUDevice.prototype.createShaderModule = function (d) {
    const m = csm.call(this, d);
    m.__name = d.label || (d.code.match(/fn main[^{]*/) || ["?"])[0].slice(0, 40) + " #" + d.code.length;
    return m;
  };
  const cp = GPUDevice.prototype.createComputePipeline;
  GPUDevice.prototype.createComputePipeline = function (d) {
    const p = cp.call(this, d);
    p.__name = (d.compute && d.compute.module && (d.compute.module.__name || d.compute.module.label)) || "?";
    globalThis.__dev = this;
    return p;
  };
  const pe = GPUComputePassEncoder.prototype;
  let cur = {}, pending = [], lastList = [];
  const sp = pe.setPipeline, sb = pe.setBindGroup, dw = pe.dispatchWorkgroups;
  pe.setPipeline = function (p) { cur.p = p; return sp.call(this, p); };
  pe.setBindGroup = function (i, g, o) { cur.g = g; return sb.call(this, i, g, o); };
  pe.dispatchWorkgroups = function (x, y = 1, z = 1) {
    pending.push({ p: cur.p, g: cur.g, x, y, z });
    return dw.call(this, x, y, z);
  };
  const qs = GPUQueue.prototype.submit;
  let lastSubmit = 0;
  GPUQueue.prototype.submit = function (...a) { lastSubmit = performance.now(); lastList = pending; pending = []; return qs.apply(this, a); };
  // Event-loop gaps and the submit -> map -> resolve timeline.
  const tl = { gaps: [], maps: [], kernels: null, whole: [] };
  let last = performance.now();
  setInterval(() => { const n = performance.now(); if (n - last > 50) tl.gaps.push(Math.round(n - last)); last = n; }, 5);
  let armed = -1;
  const time = async (list, reps) => {
    const dev = globalThis.__dev, t0 = performance.now();
    for (let i = 0; i < reps; i++) {
      const enc = dev.createCommandEncoder(); const pass = enc.beginComputePass();
      for (const d of list) { sp.call(pass, d.p); sb.call(pass, 0, d.g); dw.call(pass, d.x, d.y, d.z); }
      pass.end(); qs.call(dev.queue, [enc.finish()]);
      await dev.queue.onSubmittedWorkDone();
    }
    return (performance.now() - t0) / reps;
  };
  const bm = GPUBuffer.prototype.mapAsync;
  GPUBuffer.prototype.mapAsync = async function (...a) {
    const t0 = performance.now(), sub = lastSubmit, list = lastList;
    await bm.apply(this, a);
    tl.maps.push([Math.round(t0 - sub), Math.round(performance.now() - t0), list.length]);
    if (armed > 0 && --armed === 0) {
      // The session is alive: replay this decode step's dispatches.
      tl.whole.push(await time(list, 3));
      tl.kernels = [];
      for (const d of list) tl.kernels.push({ name: d.p.__name, x: d.x, y: d.y, z: d.z, ms: await time([d], 3) });
      tl.whole.push(await time(list, 3));
    }
  };
  addEventListener("message", (e) => {
    const m = e.data;
    if (m.op === "__profileArm") { armed = 3; tl.gaps = []; tl.maps = []; postMessage({ id: m.id, type: "result", value: true }); }
    if (m.op === "__timeline") postMessage({ id: m.id, type: "result", value: tl });
  });
})();
`

// TestProfileDecode (CORTIQ_E2E_PROFILE=1) times each kernel of one
// stories260K decode step on SwiftShader: where WebGPU decode time goes.
func TestProfileDecode(t *testing.T) {
	if os.Getenv("CORTIQ_E2E_PROFILE") == "" {
		t.Skip("set CORTIQ_E2E_PROFILE=1 to profile the WebGPU kernels")
	}
	needBrowser(t)
	model := os.Getenv("CORTIQ_E2E_PROFILE_MODEL")
	if model == "" {
		model = needShared(t, "fixtures/models/stories260K.gguf")
	}
	w, err := os.ReadFile(filepath.Join(bundleDir, "worker.js"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundleDir, "worker.js"), append([]byte(gpuProfile), w...), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(filepath.Join(bundleDir, "worker.js"), w, 0o644)
	srv := newServer(t, map[string]string{"m": model})
	b := newBrowser(t, true, "")
	b.open(srv.url() + "/")
	b.mustLoad("m", `{backend: "webgpu"}`, 5*time.Minute)
	var ok bool
	b.mustEval(`cortiq.generate({ids: [1, 403, 407], maxTokens: 2, temperature: 0}).then(() => cortiq._call("__profileArm", {})).then(() => true)`, &ok, 5*time.Minute)
	b.mustEval(`cortiq.generate({ids: [1, 403, 407], maxTokens: 6, temperature: 0}).then(() => true)`, &ok, 5*time.Minute)
	var tl struct {
		Gaps    []float64   `json:"gaps"`
		Maps    [][]float64 `json:"maps"`
		Whole   []float64   `json:"whole"`
		Kernels []struct {
			Name string  `json:"name"`
			X    int     `json:"x"`
			Y    int     `json:"y"`
			Z    int     `json:"z"`
			MS   float64 `json:"ms"`
		} `json:"kernels"`
	}
	b.mustEval(`cortiq._call("__timeline", {})`, &tl, time.Minute)
	t.Logf("event-loop gaps > 50 ms: %v", tl.Gaps)
	t.Logf("submits [submit->mapAsync ms, mapAsync->resolved ms, dispatches]: %v", tl.Maps)
	t.Logf("one decode step replayed whole (before, after the per-kernel runs): %v ms", tl.Whole)
	type agg struct {
		n  int
		ms float64
	}
	by := map[string]*agg{}
	total := 0.0
	for _, k := range tl.Kernels {
		a := by[k.Name]
		if a == nil {
			a = &agg{}
			by[k.Name] = a
		}
		a.n++
		a.ms += k.MS
		total += k.MS
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]].ms > by[names[j]].ms })
	t.Logf("%d dispatches, %.1f ms when each runs alone", len(tl.Kernels), total)
	for _, n := range names {
		t.Logf("%8.1f ms  %3d x  %s", by[n].ms, by[n].n, n)
	}
}

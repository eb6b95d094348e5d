package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
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
    this.__dev = this;
    globalThis.__dev = this;
    return p;
  };
  const pe = GPUComputePassEncoder.prototype;
  let cur = {}, rec = null;
  const sp = pe.setPipeline, sb = pe.setBindGroup, dw = pe.dispatchWorkgroups;
  pe.setPipeline = function (p) { cur.p = p; return sp.call(this, p); };
  pe.setBindGroup = function (i, g, o) { cur.g = g; return sb.call(this, i, g, o); };
  pe.dispatchWorkgroups = function (x, y = 1, z = 1) {
    if (rec) rec.push({ p: cur.p, g: cur.g, x, y, z });
    return dw.call(this, x, y, z);
  };
  // Event-loop gaps and the submit -> map -> resolve timeline of decode.
  globalThis.__tl = { gaps: [], maps: [] };
  let last = performance.now();
  setInterval(() => { const n = performance.now(); if (n - last > 50) __tl.gaps.push(Math.round(n - last)); last = n; }, 5);
  const bm = GPUBuffer.prototype.mapAsync, qs = GPUQueue.prototype.submit;
  let lastSubmit = 0;
  GPUQueue.prototype.submit = function (...a) { lastSubmit = performance.now(); return qs.apply(this, a); };
  GPUBuffer.prototype.mapAsync = function (...a) {
    const t0 = performance.now(), sub = lastSubmit;
    const p = bm.apply(this, a);
    p.then(() => __tl.maps.push([Math.round(t0 - sub), Math.round(performance.now() - t0)]));
    return p;
  };
  let copies = null, writes = null;
  const cbb = GPUCommandEncoder.prototype.copyBufferToBuffer;
  GPUCommandEncoder.prototype.copyBufferToBuffer = function (...a) { if (copies) copies.push(a); return cbb.apply(this, a); };
  const wb = GPUQueue.prototype.writeBuffer;
  GPUQueue.prototype.writeBuffer = function (buf, off, data, doff, size) {
    if (writes) writes.push([buf, off, new Uint8Array(data.buffer, data.byteOffset + (doff || 0), size === undefined ? data.byteLength : size).slice()]);
    return wb.call(this, buf, off, data, doff, size);
  };
  globalThis.__profileStart = () => { rec = []; copies = []; writes = []; __tl.gaps = []; __tl.maps = []; };
  globalThis.__profileRun = async () => {
    const list = rec; rec = null;
    const dev = globalThis.__dev, out = [];
    for (const d of list) {
      const t0 = performance.now();
      for (let i = 0; i < 3; i++) {
        const enc = dev.createCommandEncoder(); const pass = enc.beginComputePass();
        pass.setPipeline(d.p); pass.setBindGroup(0, d.g); dw.call(pass, d.x, d.y, d.z); pass.end();
        dev.queue.submit([enc.finish()]);
        await dev.queue.onSubmittedWorkDone();
      }
      out.push({ name: d.p.__name, x: d.x, y: d.y, z: d.z, ms: (performance.now() - t0) / 3 });
    }
    const whole = async (onePass) => {
      const t0 = performance.now();
      const enc = dev.createCommandEncoder();
      let pass = enc.beginComputePass();
      for (const d of list) {
        if (!onePass) { pass.end(); pass = enc.beginComputePass(); }
        pass.setPipeline(d.p); pass.setBindGroup(0, d.g); dw.call(pass, d.x, d.y, d.z);
      }
      pass.end();
      dev.queue.submit([enc.finish()]);
      await dev.queue.onSubmittedWorkDone();
      return performance.now() - t0;
    };
    const cps = copies, wrs = writes; copies = null; writes = null;
    const real = async (withWrites) => {
      const t0 = performance.now();
      if (withWrites) for (const w of wrs) wb.call(dev.queue, w[0], w[1], w[2]);
      const enc = dev.createCommandEncoder();
      const pass = enc.beginComputePass();
      for (const d of list) { pass.setPipeline(d.p); pass.setBindGroup(0, d.g); dw.call(pass, d.x, d.y, d.z); }
      pass.end();
      const c = cps[cps.length - 1];
      cbb.apply(enc, c);
      dev.queue.submit([enc.finish()]);
      await bm.call(c[2], 1, 0, (c[4] + 3) & ~3);
      const t1 = performance.now() - t0;
      c[2].unmap();
      return t1;
    };
    out.push({ name: "ALL + copy + map", ms: await real(false) });
    out.push({ name: "ALL + copy + map again", ms: await real(false) });
    out.push({ name: "ALL + writes + copy + map", ms: await real(true) });
    out.push({ name: "ALL + writes + copy + map again", ms: await real(true) });
    out.push({ name: "ALL one pass", ms: await whole(true) });
    out.push({ name: "ALL one pass again", ms: await whole(true) });
    out.push({ name: "ALL pass per dispatch", ms: await whole(false) });
    return out;
  };
  addEventListener("message", async (e) => {
    const m = e.data;
    if (m.op === "__profileStart") { __profileStart(); postMessage({ id: m.id, type: "result", value: true }); }
    if (m.op === "__profileRun") postMessage({ id: m.id, type: "result", value: await __profileRun() });
    if (m.op === "__timeline") postMessage({ id: m.id, type: "result", value: __tl });
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
	b.mustEval(`cortiq.generate({ids: [1, 403, 407], maxTokens: 2, temperature: 0}).then(() => cortiq._call("__profileStart", {})).then(() => true)`, &ok, 5*time.Minute)
	b.mustEval(`cortiq.generate({ids: [1, 403, 407], maxTokens: 6, temperature: 0}).then(() => true)`, &ok, 5*time.Minute)
	var tl any
	b.mustEval(`cortiq._call("__timeline", {})`, &tl, time.Minute)
	t.Logf("timeline: event-loop gaps > 50 ms %v; maps [submit->map, map->resolved] ms", tl)
	var prof []struct {
		Name    string  `json:"name"`
		X       int     `json:"x"`
		Y       int     `json:"y"`
		Z       int     `json:"z"`
		MS      float64 `json:"ms"`
	}
	b.mustEval(`cortiq._call("__profileRun", {})`, &prof, 10*time.Minute)
	type agg struct {
		n  int
		ms float64
	}
	by := map[string]*agg{}
	total := 0.0
	for _, p := range prof {
		if strings.HasPrefix(p.Name, "ALL") {
			t.Logf("%s: %.1f ms", p.Name, p.MS)
			continue
		}
		a := by[p.Name]
		if a == nil {
			a = &agg{}
			by[p.Name] = a
		}
		a.n++
		a.ms += p.MS
		total += p.MS
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]].ms > by[names[j]].ms })
	t.Logf("%d dispatches recorded over a prefill of 3 and one decode step: %.1f ms alone in all", len(prof), total)
	for _, n := range names {
		t.Logf("%8.1f ms  %3d x  %s", by[n].ms, by[n].n, n)
	}
}

// The demo page on top of window.cortiq: model picker, download progress,
// streaming chat, tok/s and the backend in use, stop button.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const el = {
    engine: $("engine"), notice: $("notice"), model: $("model"), models: $("models"), backend: $("backend"),
    load: $("load"), progress: $("progress"), progressText: $("progress-text"), status: $("status"),
    log: $("log"), prompt: $("prompt"), send: $("send"), stop: $("stop"), stats: $("stats"),
    maxTokens: $("maxTokens"), temperature: $("temperature"), chat: $("chat"),
  };
  const state = { loaded: null, busy: false, history: [] };
  // Tests and tools read the page's state here.
  window.cortiqUI = state;

  function mib(n) { return (n / 1048576).toFixed(n < 10485760 ? 2 : 1) + " MiB"; }
  function setStatus(text, isError) {
    el.status.textContent = text || "";
    el.status.className = "status" + (isError ? " error" : "");
  }
  function setBusy(b) {
    state.busy = b;
    el.send.disabled = b || !state.loaded;
    el.prompt.disabled = !state.loaded;
    el.load.disabled = b;
    el.stop.disabled = !b;
  }
  function showBackend(name, deviceError) {
    const gpu = name && name.startsWith("webgpu");
    el.engine.textContent = gpu ? name : "CPU (wasm)";
    el.engine.className = "badge " + (gpu ? "gpu" : "cpu");
    if (!gpu && deviceError) {
      el.notice.hidden = false;
      el.notice.textContent = "WebGPU is not in use (" + deviceError + "): the engine runs on the CPU in WebAssembly, which is slower.";
    } else {
      el.notice.hidden = true;
    }
  }

  cortiq.onFatal = (msg) => setStatus("The engine stopped: " + msg, true);
  cortiq.ready.then((r) => {
    el.engine.textContent = r.webgpu ? "engine ready (WebGPU available)" : "engine ready (CPU)";
    if (!r.webgpu) {
      el.notice.hidden = false;
      el.notice.textContent = "This browser exposes no WebGPU (navigator.gpu is missing): the engine will run on the CPU in WebAssembly, which is slower.";
    }
  }, (e) => setStatus("The engine failed to start: " + e.message, true));

  // Suggestions: the models already in this browser's storage, and the
  // names the server offers (cortiq serve lists them at /v1/models).
  const suggested = new Set();
  function suggest(name, label) {
    if (!name || suggested.has(name)) return;
    suggested.add(name);
    const o = document.createElement("option");
    o.value = name;
    if (label) o.label = label;
    el.models.appendChild(o);
  }
  cortiq.cached().then((list) => {
    for (const m of list || []) if (m.complete) suggest(m.source, "in this browser");
  }).catch(() => {});
  fetch("/v1/models").then((r) => (r.ok ? r.json() : null)).then((j) => {
    for (const m of (j && j.data) || []) suggest(m.id, "on the server");
  }).catch(() => {});

  async function load() {
    const source = el.model.value.trim();
    setBusy(true);
    el.stop.disabled = true;
    setStatus("Loading " + source + "…");
    el.progress.value = 0;
    el.progressText.textContent = "";
    try {
      const info = await cortiq.load(source, {
        backend: el.backend.value,
        onProgress(p) {
          const total = p.overallTotal > 0 ? p.overallTotal : p.total;
          const done = p.overallTotal > 0 ? p.overallDone : p.done;
          if (total > 0) el.progress.value = done / total;
          el.progressText.textContent = p.file + ": " + mib(p.done) + (p.total > 0 ? " / " + mib(p.total) : "") +
            (p.rate > 0 ? " at " + mib(p.rate) + "/s" : "") + (p.resumed > 0 ? " (resumed at " + mib(p.resumed) + ")" : "");
        },
      });
      state.loaded = info;
      state.history = [];
      el.progress.value = 1;
      el.progressText.textContent = info.fromCache ? "loaded from this browser's storage (no download)" :
        "downloaded " + mib(info.downloadedBytes) + (info.resumedBytes > 0 ? ", resumed " + mib(info.resumedBytes) : "");
      showBackend(info.backend, info.deviceError);
      setStatus(info.family + ": " + info.layers + " layers, hidden " + info.hidden + ", vocab " + info.vocab +
        " — loaded in " + info.loadSeconds.toFixed(2) + " s, heap peak +" + mib(info.heap.peakAboveBaseline));
      el.chat.checked = !!info.hasChatTemplate;
      showImage(!!info.image);
    } catch (e) {
      state.loaded = null;
      setStatus("Loading " + source + " failed: " + e.message, true);
      el.progressText.textContent = "";
    } finally {
      setBusy(false);
    }
  }

  function addMsg(role, text) {
    const d = document.createElement("div");
    d.className = "msg " + role;
    d.textContent = text;
    el.log.appendChild(d);
    el.log.scrollTop = el.log.scrollHeight;
    return d;
  }

  async function send() {
    if (!state.loaded || state.busy) return;
    const text = el.prompt.value || el.prompt.placeholder;
    const req = {
      maxTokens: Number(el.maxTokens.value) || 128,
      temperature: Number(el.temperature.value) || 0,
      backend: el.backend.value,
      topK: 40, topP: 0.95, seed: Date.now() % 1e9,
    };
    if (el.chat.checked) {
      state.history.push({ role: "user", content: text });
      req.messages = state.history.slice();
    } else {
      req.prompt = text;
    }
    addMsg("user", text);
    el.prompt.value = "";
    const out = addMsg("assistant live", el.chat.checked ? "" : text);
    let n = 0;
    const t0 = performance.now();
    setBusy(true);
    if (el.status.classList.contains("error")) setStatus("");
    try {
      const res = await cortiq.generate(req, (tok) => {
        n++;
        out.textContent += tok.text;
        el.log.scrollTop = el.log.scrollHeight;
        el.stats.textContent = tok.backend + " · " + n + " tokens · " + (n / ((performance.now() - t0) / 1000)).toFixed(1) + " tok/s";
      });
      if (el.chat.checked) state.history.push({ role: "assistant", content: res.text });
      showBackend(res.backend, res.deviceError);
      el.stats.textContent = res.backend + " · prefill " + res.prefillTokS.toFixed(1) + " tok/s · decode " +
        res.decodeTokS.toFixed(1) + " tok/s · " + res.ids.length + " tokens (" + res.finishReason + ")" +
        (res.cachedTokens ? " · " + res.cachedTokens + " prompt tokens reused" : "");
    } catch (e) {
      setStatus("Generation failed: " + e.message, true);
    } finally {
      out.classList.remove("live");
      setBusy(false);
    }
  }

  // adopt shows a model that something else loaded into the engine (the
  // remote worker mode of remote.js), so the page can chat with it too.
  state.adopt = (source, info) => {
    state.loaded = info;
    state.history = [];
    el.model.value = source;
    el.progress.value = 1;
    showBackend(info.backend, info.deviceError);
    setStatus(info.family + ": " + info.layers + " layers, vocab " + info.vocab + " — loaded for the server in " +
      info.loadSeconds.toFixed(2) + " s");
    setBusy(state.busy);
  };

  // A text-to-image pipeline swaps the chat box for the image tab.
  function showImage(on) {
    $("imagine").hidden = !on;
    document.querySelector(".compose").hidden = on;
  }

  async function imagine() {
    if (!state.loaded || state.busy) return;
    const [width, height] = $("img-size").value.split("x").map(Number);
    const steps = Number($("img-steps").value) || 8;
    const req = {
      prompt: $("img-prompt").value || $("img-prompt").placeholder, width, height, steps,
      guidance: Number($("img-guidance").value) || 0, seed: Date.now() % 1e9,
    };
    setBusy(true);
    $("img-go").disabled = true;
    $("img-progress").value = 0;
    $("img-progress-text").textContent = "encoding the prompt…";
    try {
      const res = await cortiq.imagine(req, (p) => {
        $("img-progress").value = p.step / p.steps;
        $("img-progress-text").textContent = "step " + p.step + " / " + p.steps;
      });
      const url = URL.createObjectURL(new Blob([res.png], { type: "image/png" }));
      const img = $("img-out");
      if (img.src) URL.revokeObjectURL(img.src);
      img.src = url;
      $("img-progress-text").textContent = res.width + "×" + res.height + ", " + res.steps + " steps in " +
        res.seconds.toFixed(1) + " s (" + res.backend + ")";
    } catch (e) {
      setStatus("Image generation failed: " + e.message, true);
    } finally {
      $("img-go").disabled = false;
      setBusy(false);
    }
  }
  $("img-go").onclick = imagine;

  el.load.onclick = load;
  el.send.onclick = send;
  el.stop.onclick = () => cortiq.stop();
  el.prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
  });
  el.model.addEventListener("keydown", (e) => { if (e.key === "Enter") load(); });
})();

// window.cortiq: the page's API to the engine, which runs in worker.js.
//
//   await cortiq.ready                       the engine is up ({webgpu})
//   await cortiq.load(nameOrURL, {onProgress, backend, sha256, size, refresh, retries, checkpoint,
//                                 token})   token: bearer for this page's own origin only
//   await cortiq.generate({prompt | ids | messages, maxTokens, temperature, topK, topP, minP,
//                          repeatPenalty, presencePenalty, frequencyPenalty, repeatLastN,
//                          seed, backend, stop, ignoreEOS}, onToken)
//        -> {text, ids, promptIds, backend, prefillTokS, decodeTokS, finishReason, deviceError,
//            cachedTokens (prompt tokens a kept session already held: the next chat turn prefills only the rest)}
//   await cortiq.logits(ids, {backend})      -> {logits: Float32Array [positions*vocab], vocab, positions, backend}
//   await cortiq.imagine({prompt, negativePrompt, width, height, steps, guidance, seed, latents},
//                        onProgress)        a text-to-image pipeline (load a pipeline .cmf): onProgress({step, steps})
//        -> {png: Uint8Array, image: Float32Array [3*height*width] in [0,1], width, height, steps, backend, seconds}
//   await cortiq.stats()   await cortiq.unload()   cortiq.stop()
//   await cortiq.cached()  await cortiq.remove(nameOrURL)
//
// Every call is answered by the Worker; the page thread does no engine work.
"use strict";

(() => {
  const worker = new Worker("worker.js");
  let nextID = 1;
  const calls = new Map(); // id -> {resolve, reject, onProgress, onToken}
  const logs = [];
  let readyResolve, readyReject;
  const ready = new Promise((res, rej) => { readyResolve = res; readyReject = rej; });

  worker.onmessage = (e) => {
    const m = e.data;
    switch (m.type) {
      case "ready": readyResolve({ webgpu: !!m.webgpu }); return;
      case "fatal":
        readyReject(new Error(m.message));
        for (const c of calls.values()) c.reject(new Error("engine stopped: " + m.message));
        calls.clear();
        api.onFatal && api.onFatal(m.message);
        return;
      case "log":
        logs.push(m.text);
        if (logs.length > 500) logs.shift();
        console.log("[engine] " + m.text);
        api.onLog && api.onLog(m.text);
        return;
    }
    const c = calls.get(m.id);
    if (!c) return;
    switch (m.type) {
      case "progress": c.onProgress && c.onProgress(m); break;
      case "token": c.onToken && c.onToken({ id: m.token, text: m.text, backend: m.backend }); break;
      case "result": calls.delete(m.id); c.resolve(m.js !== undefined ? m.js : m.value); break;
      case "error": {
        calls.delete(m.id);
        const err = new Error(m.message);
        err.kind = m.kind || "error";
        c.reject(err);
        break;
      }
    }
  };
  worker.onerror = (e) => {
    const msg = "worker error: " + (e.message || e);
    readyReject(new Error(msg));
    api.onFatal && api.onFatal(msg);
  };

  function call(op, args, hooks) {
    return ready.then(() => new Promise((resolve, reject) => {
      const id = nextID++;
      calls.set(id, { resolve, reject, ...(hooks || {}) });
      worker.postMessage({ id, op, ...args });
    }));
  }

  let persisted = null;
  async function persist() {
    if (persisted !== null) return persisted;
    try {
      persisted = !!(navigator.storage && navigator.storage.persist && await navigator.storage.persist());
    } catch (e) {
      persisted = false;
    }
    return persisted;
  }

  const api = {
    ready,
    logs,
    async load(source, opts = {}) {
      const { onProgress, ...rest } = opts;
      const p = await persist();
      return call("load", { source, persisted: p, ...rest }, { onProgress });
    },
    generate(opts = {}, onToken) {
      return call("generate", opts, { onToken });
    },
    imagine(opts = {}, onProgress) {
      return call("imagine", opts, { onProgress });
    },
    logits(ids, opts = {}) {
      return call("logits", { ids: Array.from(ids), ...opts });
    },
    stats() { return call("stats", {}); },
    unload() { return call("unload", {}); },
    cached() { return call("cached", {}); },
    remove(source) { return call("remove", { source }); },
    // stop cancels the running generation; it resolves once the engine has
    // seen the request (the generation then resolves with finishReason
    // "cancelled").
    stop() { return call("stop", {}); },
    // _call sends a raw request (debugging and test tools).
    _call: call,
    // storage estimates what the origin may still store.
    async storage() {
      const est = navigator.storage && navigator.storage.estimate ? await navigator.storage.estimate() : {};
      return { usage: est.usage || 0, quota: est.quota || 0, persisted: await persist() };
    },
  };
  window.cortiq = api;
})();

// Remote worker mode: opened as /?worker=1, the page attaches to the
// serving origin's websocket (/v1/ws?role=worker) and runs the jobs that
// `cortiq serve` hands it (docs/protocol.md, "Browser workers") on its own
// engine, so `cortiq remote --worker <id> run ...` drives this tab.
//
// URL parameters: worker=1 (required), name=<shown in the worker list>,
// model=<name or URL to load at once>, backend=auto|webgpu|cpu,
// token=<the server's --token>.
//
// Jobs run one at a time in arrival order (the engine serializes them
// anyway), so a cancel knows whether its job is the running one (stop the
// engine) or still waiting (drop it). Tests and tools read the state at
// window.cortiqRemote.
"use strict";

(() => {
  const params = new URLSearchParams(location.search);
  const flag = params.get("worker");
  if (flag === null || flag === "0" || flag === "false") return;

  const opts = {
    name: params.get("name") || "browser tab (" + (navigator.platform || "unknown") + ")",
    model: params.get("model") || "",
    backend: params.get("backend") || "auto",
    token: params.get("token") || "",
  };
  // The token should not stay in the address bar or the history.
  if (params.has("token")) {
    const u = new URL(location.href);
    u.searchParams.delete("token");
    history.replaceState(null, "", u.href);
  }
  const state = {
    status: "connecting", // connecting | attached | disconnected
    worker: "",           // the id the server gave this tab
    models: [],           // what the tab serves
    backend: "",
    loaded: "",           // the model loaded in the engine
    jobs: 0,              // jobs finished
    lastError: "",        // why the socket closed, or the server's last error
    loadError: "",        // why the last model load failed
    connects: 0,
  };
  window.cortiqRemote = state;

  // The badge in the header shows the state.
  const badge = document.createElement("span");
  badge.id = "remote";
  badge.className = "badge remote";
  const header = document.querySelector("header");
  if (header) header.appendChild(badge);
  function show() {
    let t;
    switch (state.status) {
      case "attached":
        t = "attached as worker " + state.worker + (state.models.length ? " · " + state.models.join(", ") : " · no model") +
          (state.loadError ? " (" + state.loadError + ")" : "");
        break;
      case "connecting": t = "worker: connecting…"; break;
      default: t = "worker: disconnected" + (state.lastError ? " (" + state.lastError + ")" : "") + ", retrying";
    }
    badge.textContent = t;
    badge.title = "jobs done: " + state.jobs;
  }
  show();

  let ws = null;
  let backoff = 500;
  let nextReq = 1;

  function send(m) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m));
  }
  function register() {
    send({ type: "register", id: "r" + nextReq++, name: opts.name, models: state.models, backend: state.backend });
  }

  // The job queue.
  const queue = [];      // {msg, cancelled, sock}
  let running = null;    // the job in the engine
  const byID = new Map(); // job id -> job, queued or running

  function enqueue(msg) {
    const job = { msg, cancelled: false, sock: ws };
    byID.set(msg.id, job);
    queue.push(job);
    pump();
  }

  async function pump() {
    if (running || !queue.length) return;
    running = queue.shift();
    try {
      await runJob(running);
    } catch (e) {
      reply(running, { type: "error", id: running.msg.id, error: { code: "worker_error", message: String(e && e.message || e) } });
    } finally {
      // A job of an earlier connection may share its id with a new one.
      if (byID.get(running.msg.id) === running) byID.delete(running.msg.id);
      running = null;
      state.jobs++;
      show();
      pump();
    }
  }

  // reply sends on the socket the job came in on: after a reconnect the
  // server has forgotten the old jobs, and their ids mean nothing.
  function reply(job, m) {
    if (job.sock === ws) send(m);
  }

  function runJob(job) {
    const m = job.msg;
    if (job.cancelled) {
      if (m.type === "generate") {
        reply(job, { type: "done", id: m.id, result: { ids: [], text: "", finish_reason: "cancelled" } });
      }
      return Promise.resolve();
    }
    if (m.type === "load") return loadJob(job);
    return generateJob(job);
  }

  async function loadModel(source, onProgress) {
    let info;
    try {
      // A server started with --token serves its model files only with
      // the bearer header; the worker sends it to that origin alone.
      info = await cortiq.load(source, { backend: opts.backend, onProgress, token: opts.token });
    } catch (e) {
      state.loadError = "loading " + source + " failed: " + e.message;
      show();
      throw e;
    }
    state.loadError = "";
    state.loaded = source;
    state.backend = info.backend || state.backend;
    state.models = [source];
    if (window.cortiqUI && window.cortiqUI.adopt) window.cortiqUI.adopt(source, info);
    show();
    return info;
  }

  async function loadJob(job) {
    const m = job.msg;
    if (!m.model) {
      reply(job, { type: "error", id: m.id, error: { code: "invalid_request_error", message: "load job without a model" } });
      return;
    }
    let last = 0;
    try {
      await loadModel(m.model, (p) => {
        const now = performance.now();
        if (now - last < 100) return; // a few progress events per second are plenty
        last = now;
        reply(job, { type: "progress", id: m.id, progress: { stage: p.phase || "fetching", loaded: p.overallDone || p.done || 0, total: p.overallTotal || p.total || 0 } });
      });
    } catch (e) {
      reply(job, { type: "error", id: m.id, error: { code: "worker_error", message: "loading " + m.model + ": " + e.message } });
      return;
    }
    reply(job, { type: "loaded", id: m.id, models: state.models, backend: state.backend });
    // The registration carries the worker list's view of this tab.
    register();
  }

  async function generateJob(job) {
    const m = job.msg;
    if (m.model && m.model !== state.loaded) {
      await loadModel(m.model);
      register();
    }
    if (!state.loaded) throw new Error("no model loaded in this tab (open it with &model=NAME, or send a load job)");
    const req = {
      maxTokens: m.max_tokens || 0,
      temperature: m.temperature || 0,
      topK: m.top_k || 0,
      topP: m.top_p || 0,
      minP: m.min_p || 0,
      repeatPenalty: m.repeat_penalty || 0,
      presencePenalty: m.presence_penalty || 0,
      frequencyPenalty: m.frequency_penalty || 0,
      repeatLastN: m.repeat_last_n || 0,
      seed: m.seed || 0,
      ignoreEOS: !!m.ignore_eos,
      stop: m.stop || [],
      backend: opts.backend,
    };
    if (m.ids && m.ids.length) req.ids = m.ids;
    else if (m.messages && m.messages.length) req.messages = m.messages;
    else req.prompt = m.prompt || "";
    const shown = logJob(m, req);
    let res;
    try {
      res = await cortiq.generate(req, (tok) => {
        if (job.cancelled) return;
        reply(job, { type: "token", id: m.id, token_id: tok.id, text: tok.text });
        if (shown) shown.textContent += tok.text;
      });
    } finally {
      if (shown) shown.classList.remove("live");
    }
    reply(job, {
      type: "done", id: m.id, result: {
        ids: res.ids, text: res.text, prompt_tokens: (res.promptIds || []).length,
        prefill_tok_s: res.prefillTokS || 0, decode_tok_s: res.decodeTokS || 0,
        backend: res.backend, finish_reason: job.cancelled ? "cancelled" : res.finishReason,
        device_error: res.deviceError || undefined,
      },
    });
  }

  // logJob shows a generate job in the page's log as it streams; the log
  // keeps the last 50 jobs.
  function logJob(m, req) {
    const log = document.getElementById("log");
    if (!log) return null;
    const head = document.createElement("div");
    head.className = "msg user";
    head.textContent = "[" + m.id + " from the server] " +
      (req.prompt !== undefined ? req.prompt : req.messages ? req.messages[req.messages.length - 1].content : req.ids.length + " token ids");
    const out = document.createElement("div");
    out.className = "msg assistant live";
    log.append(head, out);
    while (log.childElementCount > 100) log.firstElementChild.remove();
    log.scrollTop = log.scrollHeight;
    return out;
  }

  function cancel(id) {
    const job = byID.get(id);
    if (!job || job.cancelled) return;
    job.cancelled = true;
    // A waiting job answers "cancelled" when its turn comes, at once.
    if (job === running && job.msg.type === "generate") cortiq.stop().catch(() => {});
  }

  function onMessage(ev) {
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    switch (m.type) {
      case "hello":
        if (m.auth_required) {
          if (!opts.token) {
            state.lastError = "the server needs a token (&token=...)";
            ws.close();
            return;
          }
          send({ type: "auth", id: "a" + nextReq++, token: opts.token });
          return;
        }
        register();
        return;
      case "auth_ok":
        register();
        return;
      case "registered":
        state.worker = m.worker || state.worker;
        state.status = "attached";
        state.lastError = "";
        backoff = 500;
        show();
        return;
      case "generate":
      case "load":
        if (m.id) enqueue(m);
        return;
      case "cancel":
        cancel(m.id);
        return;
      case "error":
        state.lastError = (m.error && m.error.message) || "error";
        console.warn("cortiq worker: server error", m.error);
        show();
        return;
    }
  }

  function connect() {
    state.status = "connecting";
    show();
    const u = new URL("/v1/ws?role=worker", location.href);
    u.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    let sock;
    try {
      sock = new WebSocket(u.href);
    } catch (e) {
      state.lastError = e.message;
      retry();
      return;
    }
    ws = sock;
    state.connects++;
    sock.onmessage = (ev) => { if (sock === ws) onMessage(ev); };
    sock.onclose = (ev) => {
      if (sock !== ws) return;
      ws = null;
      state.status = "disconnected";
      state.worker = "";
      if (ev.code !== 1000 && !state.lastError) state.lastError = "closed (" + ev.code + ")";
      // The server dropped this tab's jobs with the socket; stop the one
      // running so a new connection finds the engine free.
      for (const job of byID.values()) job.cancelled = true;
      if (running && running.msg.type === "generate") cortiq.stop().catch(() => {});
      retry();
    };
  }

  function retry() {
    show();
    const wait = backoff * (0.75 + Math.random() / 2);
    backoff = Math.min(backoff * 2, 15000);
    setTimeout(connect, wait);
  }

  // Attach once the engine is up; a model in the URL loads first, through
  // the job queue, so generate jobs that arrive meanwhile wait for it.
  cortiq.ready.then((r) => {
    state.backend = opts.backend === "cpu" || !r.webgpu ? "cpu" : "webgpu";
    if (opts.model) {
      running = { msg: { type: "preload" }, cancelled: false, sock: null };
      loadModel(opts.model).catch(() => console.warn("cortiq worker: " + state.loadError)).finally(() => {
        running = null;
        register();
        pump();
      });
    }
    connect();
  }, (e) => {
    state.lastError = "engine failed: " + e.message;
    state.status = "disconnected";
    show();
  });
})();

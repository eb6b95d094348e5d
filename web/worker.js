// cortiq engine Worker: boots cortiq.wasm (cmd/wasm) with Go's wasm_exec.js
// and relays messages between the page (cortiq.js) and the engine.
//
// Before wasm_exec.js loads, it installs globalThis.fs: a read-only,
// Node-style file system over the Origin Private File System mounted at
// /opfs/, so the engine's importers (which use Go's os package: os.Open,
// ReadAt, Stat, ReadDir) read models that storage/download put in OPFS. Reads
// go through File blobs (getFile + slice), which take no lock, so they never
// collide with the engine's own OPFS writer (storage/opfs, sync access
// handles). Writes through os are refused with EROFS.
"use strict";

const MOUNT = "opfs";
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;

function fsError(code, msg) {
  const e = new Error(code + ": " + msg);
  e.code = code;
  return e;
}

// DOMExceptions carry a legacy numeric code; Go wants Node's string codes.
function isFSError(e) { return e && typeof e.code === "string"; }

function mapDOMError(e, path) {
  if (isFSError(e)) return e;
  switch (e && e.name) {
    case "NotFoundError": return fsError("ENOENT", path);
    case "TypeMismatchError": return fsError("ENOTDIR", path);
    case "NotAllowedError":
    case "SecurityError": return fsError("EACCES", path);
    case "NoModificationAllowedError": return fsError("EBUSY", path);
  }
  return fsError("EIO", path + ": " + (e && e.message ? e.message : String(e)));
}

function splitPath(path) {
  const parts = String(path).split("/").filter((p) => p !== "" && p !== ".");
  if (parts[0] !== MOUNT) throw fsError("ENOENT", path + " (only /" + MOUNT + "/ is mounted)");
  if (parts.includes("..")) throw fsError("EINVAL", path);
  return parts.slice(1);
}

// lookup resolves path to {dir: FileSystemDirectoryHandle} or
// {file: FileSystemFileHandle}.
async function lookup(path) {
  const parts = splitPath(path);
  let dir = await navigator.storage.getDirectory();
  for (let i = 0; i < parts.length - 1; i++) dir = await dir.getDirectoryHandle(parts[i]);
  if (parts.length === 0) return { dir };
  const base = parts[parts.length - 1];
  try {
    return { file: await dir.getFileHandle(base) };
  } catch (e) {
    if (e.name !== "TypeMismatchError") throw e;
  }
  return { dir: await dir.getDirectoryHandle(base) };
}

function makeStat(isDir, size, mtimeMs) {
  return {
    dev: 0, ino: 0, mode: isDir ? S_IFDIR | 0o755 : S_IFREG | 0o444, nlink: 1, uid: 0, gid: 0, rdev: 0,
    size: size, blksize: 4096, blocks: Math.ceil(size / 512),
    atimeMs: mtimeMs, mtimeMs: mtimeMs, ctimeMs: mtimeMs,
    isDirectory() { return isDir; },
  };
}

async function statOf(h) {
  if (h.dir) return makeStat(true, 0, 0);
  const f = await h.file.getFile();
  return makeStat(false, f.size, f.lastModified);
}

const fds = new Map();
let nextFD = 100;
const enc = new TextDecoder("utf-8");
let outBuf = "";

function cb(callback, p) {
  p.then((v) => callback(null, v), (e) => callback(mapDOMError(e, "")));
}

globalThis.fs = {
  constants: { O_WRONLY: 1, O_RDWR: 2, O_CREAT: 64, O_EXCL: 128, O_TRUNC: 512, O_APPEND: 1024, O_DIRECTORY: 65536 },
  writeSync(fd, buf) {
    outBuf += enc.decode(buf);
    const nl = outBuf.lastIndexOf("\n");
    if (nl !== -1) {
      const text = outBuf.substring(0, nl);
      outBuf = outBuf.substring(nl + 1);
      console.log(text);
      postMessage({ type: "log", fd, text });
    }
    return buf.length;
  },
  write(fd, buf, offset, length, position, callback) {
    if ((fd === 1 || fd === 2) && offset === 0 && length === buf.length && position === null) {
      callback(null, this.writeSync(fd, buf));
      return;
    }
    callback(fsError("EROFS", "the OPFS mount is read-only"));
  },
  open(path, flags, mode, callback) {
    cb(callback, (async () => {
      if ((flags & 3) !== 0 || (flags & (64 | 512 | 1024)) !== 0) throw fsError("EROFS", path + ": the OPFS mount is read-only");
      let h;
      try { h = await lookup(path); } catch (e) { throw mapDOMError(e, path); }
      const fd = nextFD++;
      const ent = { path, pos: 0, dir: h.dir || null, blob: null, stat: null };
      if (h.file) {
        ent.blob = await h.file.getFile();
        ent.stat = makeStat(false, ent.blob.size, ent.blob.lastModified);
      } else {
        ent.stat = makeStat(true, 0, 0);
      }
      fds.set(fd, ent);
      return fd;
    })());
  },
  close(fd, callback) {
    cb(callback, (async () => {
      if (!fds.delete(fd)) throw fsError("EBADF", String(fd));
      return null;
    })());
  },
  fstat(fd, callback) {
    cb(callback, (async () => {
      const ent = fds.get(fd);
      if (!ent) throw fsError("EBADF", String(fd));
      return ent.stat;
    })());
  },
  stat(path, callback) {
    cb(callback, (async () => {
      try { return await statOf(await lookup(path)); } catch (e) { throw mapDOMError(e, path); }
    })());
  },
  lstat(path, callback) { this.stat(path, callback); },
  read(fd, buffer, offset, length, position, callback) {
    cb(callback, (async () => {
      const ent = fds.get(fd);
      if (!ent) throw fsError("EBADF", String(fd));
      if (!ent.blob) throw fsError("EISDIR", ent.path);
      const pos = position === null || position === undefined ? ent.pos : Number(position);
      const end = Math.min(pos + length, ent.blob.size);
      if (end <= pos) return 0;
      let ab;
      try { ab = await ent.blob.slice(pos, end).arrayBuffer(); } catch (e) { throw mapDOMError(e, ent.path); }
      buffer.set(new Uint8Array(ab), offset);
      if (position === null || position === undefined) ent.pos += ab.byteLength;
      return ab.byteLength;
    })());
  },
  readdir(path, callback) {
    cb(callback, (async () => {
      let h;
      try { h = await lookup(path); } catch (e) { throw mapDOMError(e, path); }
      if (!h.dir) throw fsError("ENOTDIR", path);
      const names = [];
      for await (const name of h.dir.keys()) names.push(name);
      names.sort();
      return names;
    })());
  },
  fsync(fd, callback) { callback(null); },
};
for (const op of ["chmod", "chown", "fchmod", "fchown", "ftruncate", "lchown", "link", "mkdir", "readlink",
  "rename", "rmdir", "symlink", "truncate", "unlink", "utimes"]) {
  globalThis.fs[op] = (...args) => args[args.length - 1](fsError("EROFS", "the OPFS mount is read-only"));
}

// Before `make wasm` the bundle is missing: report the server's
// explanation, not just "failed to load".
function missingBundle(name, err) {
  try {
    const xhr = new XMLHttpRequest();
    xhr.open("GET", name, false);
    xhr.send();
    if (xhr.status !== 200) return new Error(name + ": HTTP " + xhr.status + ": " + xhr.responseText.trim());
  } catch (_) { /* report the original error */ }
  return err;
}
try {
  importScripts("wasm_exec.js");
} catch (err) {
  const e = missingBundle("wasm_exec.js", err);
  postMessage({ type: "fatal", message: String(e.message || e) });
  throw e;
}

// cortiqRequestDevice asks for the best adapter and a device with the
// adapter's own limits (the Go binding cannot pass required limits).
globalThis.cortiqRequestDevice = async () => {
  if (!navigator.gpu) throw new Error("navigator.gpu is undefined");
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new Error("navigator.gpu.requestAdapter() returned no adapter (WebGPU disabled or unsupported here)");
  const requiredLimits = {};
  for (const k of ["maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
    "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX", "maxComputeWorkgroupSizeY",
    "maxComputeWorkgroupSizeZ", "maxComputeWorkgroupsPerDimension", "maxStorageBuffersPerShaderStage",
    "maxBindingsPerBindGroup", "maxUniformBufferBindingSize"]) {
    if (adapter.limits[k] !== undefined) requiredLimits[k] = adapter.limits[k];
  }
  const device = await adapter.requestDevice({ requiredLimits });
  device.addEventListener("uncapturederror", (e) => {
    postMessage({ type: "log", fd: 2, text: "WebGPU error: " + (e.error && e.error.message) });
  });
  device.lost.then((i) => postMessage({ type: "log", fd: 2, text: "WebGPU device lost: " + i.message }));
  const ai = adapter.info || {};
  const info = {
    vendor: ai.vendor || "", architecture: ai.architecture || "", device: ai.device || "",
    description: ai.description || "", type: adapter.isFallbackAdapter || ai.isFallbackAdapter ? "fallback" : "",
  };
  return { device, info };
};

// Messages that arrive before the engine is up wait here.
const pending = [];
onmessage = (e) => {
  if (globalThis.cortiqHandle) globalThis.cortiqHandle(JSON.stringify(e.data));
  else pending.push(e.data);
};

(async () => {
  try {
    const go = new Go();
    go.argv = ["cortiq.wasm"];
    go.exit = (code) => postMessage({ type: "fatal", message: "engine exited with code " + code });
    const resp = await fetch("cortiq.wasm");
    if (!resp.ok) throw new Error("cortiq.wasm: HTTP " + resp.status + ": " + (await resp.text()).trim());
    const result = await WebAssembly.instantiateStreaming(resp, go.importObject);
    // Every request of the engine bypasses the HTTP cache: model files are
    // kept in OPFS, and a cached (possibly stale or bad) response must never
    // stand in for the server's answer to a download or a resume. Go's
    // fetch-based transport has no option for the cache mode.
    const plainFetch = globalThis.fetch;
    globalThis.fetch = (input, init) => plainFetch(input, Object.assign({ cache: "no-store" }, init));
    // The WebGPU binding writes buffers straight from wasm memory through
    // globalThis.wasm.instance.exports.mem.
    globalThis.wasm = result;
    const run = go.run(result.instance);
    // main() registers cortiqHandle before it posts "ready"; drain anything
    // that came earlier.
    const drain = () => {
      if (!globalThis.cortiqHandle) { setTimeout(drain, 5); return; }
      while (pending.length) globalThis.cortiqHandle(JSON.stringify(pending.shift()));
    };
    drain();
    await run;
  } catch (err) {
    postMessage({ type: "fatal", message: String(err && err.stack ? err.stack : err) });
  }
})();

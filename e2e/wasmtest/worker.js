// Runs a GOOS=js Go test binary inside a dedicated Worker and forwards its
// output to the page. Served by wasmtest.Run; not meant to be used directly.
importScripts("wasm_exec.js");

const decoder = new TextDecoder("utf-8");
// wasm_exec.js installs a console-backed fs fallback; route stdout/stderr
// to the page instead so the native driver sees every byte in order.
globalThis.fs.writeSync = function (fd, buf) {
  postMessage({ t: "out", s: decoder.decode(buf) });
  return buf.length;
};

onmessage = async (e) => {
  const { args, env } = e.data;
  try {
    const go = new Go();
    go.argv = ["test.wasm", ...args];
    go.env = env;
    let exitCode = null;
    go.exit = (code) => {
      exitCode = code;
    };
    const { instance } = await WebAssembly.instantiateStreaming(
      fetch("test.wasm"),
      go.importObject,
    );
    await go.run(instance);
    postMessage({ t: "exit", code: exitCode === null ? 0 : exitCode });
  } catch (err) {
    postMessage({ t: "error", s: String(err && err.stack ? err.stack : err) });
  }
};

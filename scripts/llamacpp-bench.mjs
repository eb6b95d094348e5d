// llama.cpp side of the CPU comparison in BENCHMARKS.md. Run from a directory where
// `npm install node-llama-cpp@3.22.1` was done: node llamacpp-bench.mjs FILE.gguf [prompt] [gen]
// The prompt ids are the same deterministic sequence `cortiq bench` uses.
import {getLlama} from "node-llama-cpp";
const [modelPath, nPrompt = "128", nGen = "128"] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never"});
const model = await llama.loadModel({modelPath});
const ctx = await model.createContext({contextSize: 512, threads: 2, batchSize: 512});
const seq = ctx.getSequence();
const vocab = model.tokens ? 0 : 0;
let x = 12345 >>> 0; const prompt = [];
for (let i = 0; i < +nPrompt; i++) { x = (Math.imul(x, 1664525) + 1013904223) >>> 0; prompt.push(3 + (x >>> 8) % 30000); }
let best = {prefill: 0, decode: 0};
for (let rep = 0; rep < 2; rep++) {
  await seq.clearHistory();
  const t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(prompt);
  const t1 = performance.now();
  let n = 0; const t2 = performance.now();
  for await (const tok of seq.evaluate([prompt[0]], {temperature: 0})) { if (++n >= +nGen) break; }
  const t3 = performance.now();
  const pf = +nPrompt / ((t1 - t0) / 1000), dc = n / ((t3 - t2) / 1000);
  console.log(`rep ${rep}: prefill ${pf.toFixed(1)} tok/s, decode ${dc.toFixed(1)} tok/s`);
  best.prefill = Math.max(best.prefill, pf); best.decode = Math.max(best.decode, dc);
}
console.log(JSON.stringify(best));
process.exit(0);

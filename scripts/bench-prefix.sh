#!/bin/bash
# Prefix reuse (issue 14): second-turn time to first token in a 2k-token
# chat, with and without prefix reuse, on the device and the CPU. Run from
# the repo root like bench-h200.sh (same carry: bin/cortiq.gz, .gl). MODEL
# defaults to a synth llama-1b q4_0. For each backend and --prompt-cache
# (0 = off, 1GiB = on) it serves the model, sends turn 1 (2048 prompt ids,
# 32 generated), then turn 2 (turn 1's ids plus 96 new ones: the next turn
# of the chat) streaming, and prints the second turn's time to the first
# streamed token and the cortiq_prompt_tokens_reused_total counter. Lines
# go to $OUT/prefix.jsonl.
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x $f /; done; ldconfig 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
BACKENDS=${BACKENDS:-"webgpu cpu"}
if [ -z "$MODEL" ]; then
  $B synth --shape llama-1b --quant q4_0 -o /tmp/m/ >/dev/null 2>&1
  MODEL=/tmp/m/llama-1b-q4_0.gguf
fi
PORT=${PORT:-18431}
export N1=${N1:-2048} IDS=${IDS:-30000} # turn 1's prompt length; ids are drawn from 3..IDS-1 (within the vocabulary)
for be in $BACKENDS; do
  for cache in 0 1GiB; do
    $B serve -m $MODEL --backend $be --ctx ${CTX:-4096} --prompt-cache $cache --addr 127.0.0.1:$PORT >/tmp/serve.log 2>&1 &
    pid=$!
    for i in $(seq 1 240); do curl -sf http://127.0.0.1:$PORT/v1/models >/dev/null && break; sleep 0.5; done
    python3 - "$PORT" "$be" "$cache" <<'PY' | tee -a $O/prefix.jsonl
import json, os, random, sys, time, urllib.request
port, be, cache = sys.argv[1:]
base = "http://127.0.0.1:%s" % port
model = json.load(urllib.request.urlopen(base + "/v1/models"))["data"][0]["id"]
rng = random.Random(14)
def post(body):
    req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=600)
n1, ids = int(os.environ["N1"]), int(os.environ["IDS"])
turn1 = [rng.randrange(3, ids) for _ in range(n1)]
post({"model": model, "prompt": turn1, "max_tokens": 32, "temperature": 0}).read()
turn2 = turn1 + [rng.randrange(3, ids) for _ in range(96)]
t0 = time.perf_counter()
r = post({"model": model, "prompt": turn2, "max_tokens": 16, "temperature": 0, "stream": True})
ttft = None
for line in r:
    if line.startswith(b"data: ") and ttft is None:
        ttft = time.perf_counter() - t0
r.read()
metrics = urllib.request.urlopen(base + "/metrics").read().decode()
reused = [l.split()[-1] for l in metrics.splitlines() if l.startswith("cortiq_prompt_tokens_reused_total")]
print(json.dumps({"case": "second turn of a %d-token chat" % n1, "backend": be, "prompt_cache": cache,
                  "ttft_s": round(ttft, 4), "prompt_tokens_reused": reused[0] if reused else None}))
PY
    kill $pid; wait $pid 2>/dev/null
  done
done

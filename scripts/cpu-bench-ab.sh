#!/bin/bash
# cortiq binaries against each other and against llama.cpp (node-llama-cpp
# 3.22.1) on this machine's CPU, the same synth files, interleaved A B A B:
# issue 16's table on the dev VM. Run on a quiet machine:
#   scripts/cpu-bench-ab.sh MODELDIR NLCDIR BIN [BIN ...] > ab.jsonl
#   python3 scripts/cpu-bench-table.py ab.jsonl
# MODELDIR holds (or gets, made by the last BIN) qwen-0.5b-QUANT.gguf and
# llama-1b-QUANT.gguf; NLCDIR is a folder where `npm install
# node-llama-cpp@3.22.1` was run (llamacpp-bench.mjs is copied there); each
# BIN is a cortiq binary (`go build -o /tmp/ab/NAME ./cmd/native`), named
# in the log by its file name. THREADS (default 2) sets GOMAXPROCS and
# llama.cpp's threads; ROUNDS (default 2), SHAPES, QUANTS as in
# cpu-bench-h200.sh; the read bandwidth is measured before and after.
# Prints JSON lines, each result after a note naming it (cpu-bench-table.py
# reads them), with the load average beside every number.
set -u
M=${1:?model dir}; N=${2:?node-llama-cpp dir}; shift 2
BINS=("$@"); [ ${#BINS[@]} -gt 0 ] || { echo "no cortiq binary" >&2; exit 2; }
LAST=${BINS[${#BINS[@]}-1]}
T=${THREADS:-2}; ROUNDS=${ROUNDS:-2}
SHAPES=${SHAPES:-"qwen-0.5b llama-1b"}
QUANTS=${QUANTS:-"q4_0 q8_0 q4_K_M"}
cd "$(dirname "$0")/.."
sed "s/threads: 2,/threads: $T,/" scripts/llamacpp-bench.mjs > "$N/llamacpp-bench.mjs"
mkdir -p "$M"
for s in $SHAPES; do for q in $QUANTS; do
  [ -f "$M/$s-$q.gguf" ] || "$LAST" synth --shape $s --quant $q -o "$M/$s-$q.gguf" >&2
done; done
export GOMAXPROCS=$T
log() { echo "{\"note\":\"$*\",\"time\":\"$(date -u +%FT%TZ)\",\"load\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"cpu\":\"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\"}"; }
for round in $(seq "$ROUNDS"); do
  log "threads $T round $round bandwidth"; "$LAST" bench --bandwidth --json 2>/dev/null
  for s in $SHAPES; do for q in $QUANTS; do f=$M/$s-$q.gguf
    for b in "${BINS[@]}"; do
      log "threads $T round $round cortiq $(basename "$b") $s-$q"
      timeout 300 "$b" bench -m "$f" --backend cpu --prompt 64 --gen 64 --reps 2 --json 2>/dev/null | tail -1
    done
    log "threads $T round $round llama.cpp $s-$q"
    (cd "$N" && timeout 300 node llamacpp-bench.mjs "$f" 64 64 2>/dev/null | tail -1)
  done; done
done
log "threads $T round $ROUNDS bandwidth"; "$LAST" bench --bandwidth --json 2>/dev/null

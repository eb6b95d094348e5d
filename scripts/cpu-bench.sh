#!/bin/bash
# CPU decode/prefill against llama.cpp on the identical GGUF files, A B A B,
# then cortiq at each lower kernel level, with the read bandwidth before
# and after (BENCHMARKS.md, "CPU kernel levels"). Run on a quiet machine:
#   scripts/cpu-bench.sh MODELDIR NLCDIR [THREADS]
# MODELDIR holds cortiq-synth files (qwen-0.5b-q4_0.gguf …: `cortiq synth
# --shape qwen-0.5b --quant q4_0 -o MODELDIR/qwen-0.5b-q4_0.gguf`; the six
# files of issue 16's table are made first where missing); NLCDIR is a folder where
# `npm install node-llama-cpp@3.22.1` was run (llamacpp-bench.mjs is copied
# there). THREADS (default 2) sets GOMAXPROCS; the llama.cpp script uses 2.
set -e
M=${1:?model dir}; N=${2:?node-llama-cpp dir}; T=${3:-2}
cd "$(dirname "$0")/.."
go build -o bin/cortiq ./cmd/native
cp scripts/llamacpp-bench.mjs "$N/"
B=$PWD/bin/cortiq
mkdir -p "$M"
for shape in qwen-0.5b llama-1b; do
  for q in q4_0 q8_0 q4_K_M; do
    [ -f "$M/$shape-$q.gguf" ] || $B synth --shape $shape --quant $q -o "$M/$shape-$q.gguf"
  done
done
export GOMAXPROCS=$T
log() { echo "## $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) :: $*"; }
log "$(grep -m1 'model name' /proc/cpuinfo)"
log bandwidth; $B bench --bandwidth --json
# The decode products alone (llama-1b's shapes, 0.7-1.3 GB of weights, past
# the last-level cache): GB/s and its share of the read bandwidth (of_read).
log kernels; go test -run XXX -bench DecodeStream -cpu 1,$T -benchtime 2s ./cpu/kernel | grep Bench
CORTIQ_KSPEED=1 go test -count=1 -run DecodeStreamSpeed -v ./cpu/kernel | grep 'decode step'
CORTIQ_KSPEED=1 CORTIQ_KSPEED_SHAPE=qwen-0.5b go test -count=1 -run DecodeStreamSpeed -v ./cpu/kernel | grep 'decode step'
CORTIQ_KSPEED=1 CORTIQ_KSPEED_WALL=1 CORTIQ_KSPEED_SHAPE=qwen-0.5b go test -count=1 -run DecodeStreamSpeed -v ./cpu/kernel | grep 'decode step'
for q in q4_0 q8_0 q4_K_M; do
  for shape in qwen-0.5b llama-1b; do
    f=$M/$shape-$q.gguf
    [ -f "$f" ] || continue
    for rep in 1 2; do
      log cortiq "$f" rep $rep; $B bench -m "$f" --backend cpu --prompt 64 --gen 64 --reps 2 --json
      log llama.cpp "$f" rep $rep; (cd "$N" && timeout 300 node llamacpp-bench.mjs "$f" 64 64 | tail -1)
    done
    for l in amx avx512vnni avx512 avx2; do
      log cortiq "$f" level $l; CORTIQ_CPU_LEVEL=$l $B bench -m "$f" --backend cpu --prompt 64 --gen 64 --reps 2 --json
    done
    log cortiq "$f" exact; CORTIQ_KERNEL=exact $B bench -m "$f" --backend cpu --prompt 64 --gen 64 --reps 2 --json
  done
done
log bandwidth; $B bench --bandwidth --json

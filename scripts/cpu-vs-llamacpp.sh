#!/usr/bin/env bash
# CPU prefill/decode of cortiq next to llama.cpp's llama-bench (built from
# source, CPU only) on the identical synth llama-1b GGUF files, interleaved
# A B A B in one run (issues 13 and 16).
# llama.cpp: upstream commit 0253fb21f (2026-05-16), `git archive 0253fb21f CMakeLists.txt cmake common
# ggml include src tools vendor licenses` in the fetchable mirror kmbandy/llama.cpp.
# On the dev VM (Sapphire Rapids, 2 vCPUs) llama.cpp's -DGGML_NATIVE=ON build
# dies with SIGILL in its AMX q4_0/q8_0 matmul (tilezero on an OpenMP thread:
# the VM loses the tile configuration; cortiq's AMX level is opt-in for the
# same reason), so the bench binary is built with the same ISA minus AMX:
#   cmake -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX=ON \
#     -DGGML_AVX2=ON -DGGML_AVX_VNNI=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
#     -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
#     -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF \
#     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF \
#     -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF
#   cmake --build b --target llama-bench -j2
#   scripts/cpu-vs-llamacpp.sh MODELDIR LLAMA_BIN_DIR [THREADS] [ROUNDS]
# MODELDIR holds llama-1b-QUANT.gguf for the quants below, made with
#   cortiq synth --shape llama-1b --quant QUANT -o MODELDIR/llama-1b-QUANT.gguf
# Prints one JSON line per run (tagged with tool, file, round) and, at the
# end, a table of medians over the rounds: cortiq reports the best of its
# --reps, so llama.cpp's side is the best of its -r samples too.
set -euo pipefail
M=${1:?model dir}; L=${2:?llama.cpp bin dir (llama-bench)}; T=${3:-2}; R=${4:-2}
QUANTS=${QUANTS:-"q4_0 q8_0 q4_K_M q5_K_M q3_K_M iq4_xs"}
cd "$(dirname "$0")/.."
go build -o bin/cortiq ./cmd/native
B=$PWD/bin/cortiq
export GOMAXPROCS=$T
LOG=$(mktemp)
log() { echo "## $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) :: $*" >&2; }
log "$(grep -m1 'model name' /proc/cpuinfo), $(nproc) cpus, threads $T, rounds $R"
for round in $(seq 1 "$R"); do
  for q in $QUANTS; do
    f=$M/llama-1b-$q.gguf
    [ -f "$f" ] || { log "skip $f (missing)"; continue; }
    log cortiq "$f" round "$round"
    $B bench -m "$f" --backend cpu --prompt 64 --gen 32 --reps 3 --json 2>/dev/null |
      jq -c --arg q "$q" --arg r "$round" '{tool:"cortiq", quant:$q, round:($r|tonumber), pp:.prefill_tok_s, tg:.decode_tok_s, level:.kernel_level, mode:.kernel_mode}' | tee -a "$LOG"
    log llama.cpp "$f" round "$round"
    "$L/llama-bench" -m "$f" -t "$T" -p 64 -n 32 -r 3 -o jsonl 2>/dev/null |
      jq -c -s --arg q "$q" --arg r "$round" '{tool:"llama.cpp", quant:$q, round:($r|tonumber),
        pp:(map(select(.n_prompt>0))[0].samples_ts|max), tg:(map(select(.n_gen>0))[0].samples_ts|max),
        pp_avg:(map(select(.n_prompt>0))[0].avg_ts), tg_avg:(map(select(.n_gen>0))[0].avg_ts), commit:.[0].build_commit}' | tee -a "$LOG"
  done
done
echo
echo "| file | cortiq pp | cortiq tg | llama.cpp pp | llama.cpp tg | pp ratio | tg ratio |"
echo "|---|---|---|---|---|---|---|"
jq -s -r '
  def median: sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  group_by(.quant)[] as $g
  | ($g | map(select(.tool=="cortiq"))) as $c | ($g | map(select(.tool=="llama.cpp"))) as $l
  | ($c|map(.pp)|median) as $cp | ($c|map(.tg)|median) as $ct
  | ($l|map(.pp)|median) as $lp | ($l|map(.tg)|median) as $lt
  | "| llama-1b-\($g[0].quant) | \($cp*10|round/10) | \($ct*100|round/100) | \($lp*10|round/10) | \($lt*100|round/100) | \($cp/$lp*100|round/100) | \($ct/$lt*100|round/100) |"' "$LOG"
rm -f "$LOG"

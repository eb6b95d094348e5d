#!/bin/bash
# The native CUDA backend on the H200, beside llama.cpp in the same run:
# run through the device tool from the repo root with carry [bin] after
#   go build -ldflags "-s -w" -o bin/cortiq ./cmd/native && gzip -kf bin/cortiq
#   go test -c -ldflags "-s -w" -o bin/cuda.test ./cuda && gzip -kf bin/cuda.test
# (the kernels' PTX is embedded in both; `make cuda-kernels` rebuilds it)
# and, for the kernels' own harness (checks, decode attention by depth, whole
# decode steps by attention path; see its header):
#   nvcc -ccbin g++-11 -O3 -std=c++17 -arch=sm_90 -o bin/harness cuda/kernels/test/harness.cu && gzip -kf bin/harness
# llama.cpp: bin/llama-bench when present (built by scripts/bench-h200.sh's
# recipe), else only cortiq's numbers are printed.
set -u
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz && chmod +x bin/cortiq
[ -f bin/cuda.test.gz ] && gunzip -kf bin/cuda.test.gz && chmod +x bin/cuda.test
[ -f bin/harness.gz ] && gunzip -kf bin/harness.gz && chmod +x bin/harness
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
$B devices 2>&1 | grep -E "^cuda"
mkdir -p /tmp/m
for q in q4_0 q8_0 q4_K_M; do $B synth --shape llama-1b --quant $q -o /tmp/m/ 2>&1; done
for q in q4_0 q8_0 q4_K_M; do
  m=/tmp/m/llama-1b-$q.gguf
  for args in "--prompt 512" "--prompt 2048" "--prompt 512 --greedy-batch 8" "--prompt 2048 --greedy-batch 8"; do
    timeout 120 $B bench -m $m --backend cuda $args --gen 128 --reps 3 --json 2>&1 | tee -a $O/bench-cuda.jsonl
  done
  if [ -x bin/llama-bench ]; then
    bin/llama-bench -m $m -ngl 99 -p 512,2048 -n 128 -o jsonl 2>/dev/null | tee -a $O/bench-llamacpp.jsonl
    bin/llama-bench -m $m -ngl 99 -p 0 -n 128 -d 2048 -o jsonl 2>/dev/null | tee -a $O/bench-llamacpp.jsonl
  fi
done
# Where the time goes: per-kernel GPU time (CUDA events) of a 512-token
# prefill and 16 decode steps, and the backend's own timings.
[ -x bin/cuda.test ] && CORTIQ_CUDA_BENCH=llama-1b:q4_0,q8_0,q4_K_M bin/cuda.test -test.v -test.run Bench 2>&1 | tee $O/cuda-kernels.txt
# The same decode step outside the engine: attention by depth and split
# count, and a graph of 16 greedy steps at depths 511 and 2047 per attention
# path (two-pass, one-pass, one-pass with the RoPE fused).
[ -x bin/harness ] && bin/harness step 2>&1 | grep -v " ok$" | tee $O/cuda-harness.txt

#!/bin/bash
# The int8 tensor-core prefill GEMM (cuda/kernels/gemmq.cu) on the H200,
# step by step: bash scripts/bench-mmq-h200.sh harness profile-new parity …
# run through the device tool from the repo root, carrying the gzipped
# binaries in bin/ built here:
#   nvcc -O3 -std=c++17 -arch=sm_90 -o bin/harness-new cuda/kernels/test/harness.cu
#   go test -c -ldflags "-s -w" -o bin/cuda-new.test ./cuda     (and -old from the commit before)
#   go build -ldflags "-s -w" -o bin/cortiq-new ./cmd/native    (and -old)
#   gzip -kf bin/*   (or xz -9 -k: smaller; unpacked by xz or python3)
# Steps: harness (kernel checks, then the prefill GEMMs f16 wmma vs int8 mma
# and a whole prefill's GEMM/attention/rest split), profile-new|profile-old
# (per-kernel GPU time of a 512- and 2048-token prefill and the prefill
# rate, synth llama-1b q4_0/q8_0/q4_K_M written once to /tmp/m), parity
# (cuda parity tests of the new binary), bench-new|bench-old (`cortiq bench
# --prompt 512|2048`, best of 3).
set -u
O=${OUT:-/tmp}
for f in bin/*.gz; do [ -f "$f" ] && gunzip -kf "$f"; done
for f in bin/*.xz; do
  [ -f "$f" ] && { xz -dkf "$f" 2>/dev/null || python3 -c 'import lzma,sys; open(sys.argv[1][:-3],"wb").write(lzma.open(sys.argv[1]).read())' "$f"; }
done
chmod +x bin/* 2>/dev/null
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
mkdir -p /tmp/m
# The shared fixtures for the parity tests, when carried as shared.tgz.
if [ -f shared.tgz ]; then mkdir -p sh && tar xzf shared.tgz -C sh && export CORTIQ_SHARED=$PWD/sh; fi
for step in "$@"; do
  echo "== $step ($(date +%T))"
  case $step in
  harness) timeout 45 bin/harness-new prefill 2>&1 | tee "$O/harness.txt" | grep -v ' ok$' ;;
  profile-new | profile-old)
    CORTIQ_CUDA_PREFILL=llama-1b:q4_0,q8_0,q4_K_M CORTIQ_CUDA_PREFILL_DIR=/tmp/m \
      timeout 40 "bin/cuda-${step#profile-}.test" -test.run TestProfilePrefill -test.v 2>&1 | tee "$O/$step.txt" ;;
  parity) timeout 40 bin/cuda-new.test -test.run 'TestCodecParity|TestParity|TestStories|TestKVF16' -test.v 2>&1 |
    tee "$O/parity.txt" | grep -E '^(---|ok|FAIL|PASS)|prompt|decode steps' ;;
  bench-new | bench-old)
    for q in q4_0 q8_0 q4_K_M; do
      m=/tmp/m/llama-1b-$q.gguf
      [ -f "$m" ] || "bin/cortiq-${step#bench-}" synth --shape llama-1b --quant $q -o /tmp/m/ >/dev/null 2>&1
      for p in 512 2048; do
        timeout 20 "bin/cortiq-${step#bench-}" bench -m "$m" --backend cuda --prompt $p --gen 16 --reps 3 --json 2>&1 |
          tee -a "$O/$step.jsonl" | tail -1
      done
    done ;;
  esac
done

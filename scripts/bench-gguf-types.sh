#!/bin/bash
# Decode tok/s per GGUF type (issue 13) for the synth llama-1b shape, on the
# device and on the CPU. On the H200 machine: run from the repo root through
# the device tool as scripts/bench-h200.sh says (carry bin/cortiq.gz, .gl).
# TYPES overrides the list; the IQ encoders search their code books, so the
# IQ files take minutes each to write on 16 cores (IQ1 the longest).
# llama.cpp on the same files, where LLAMA_BENCH names its llama-bench:
#   $LLAMA_BENCH -m /tmp/m/llama-1b-TYPE.gguf -p 0 -n 128 -ngl 99 (CUDA) or -ngl 0 (CPU).
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
if ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
TYPES=${TYPES:-"q4_1 q5_0 q5_1 q2_K q3_K q5_K iq4_nl iq4_xs tq2_0 tq1_0 mxfp4 q3_K_M q5_K_M q2_K_mix iq3_xxs iq3_s iq2_xxs iq2_xs iq2_s iq1_s iq1_m"}
BACKENDS=${BACKENDS:-"webgpu cpu"}
mkdir -p /tmp/m
for q in $TYPES; do
  [ -f /tmp/m/llama-1b-$q.gguf ] || timeout 580 $B synth --shape llama-1b --quant $q -o /tmp/m/ 2>&1
  for be in $BACKENDS; do
    timeout 300 $B bench -m /tmp/m/llama-1b-$q.gguf --backend $be --prompt 128 --gen 128 --reps 3 --json 2>&1 | grep -v XDG | tee -a $O/bench-types.jsonl
    if [ -n "$LLAMA_BENCH" ]; then
      ngl=99; [ $be = cpu ] && ngl=0
      timeout 300 $LLAMA_BENCH -m /tmp/m/llama-1b-$q.gguf -p 0 -n 128 -ngl $ngl -o json 2>/dev/null | tee -a $O/llamacpp-types.json
    fi
  done
done

#!/bin/bash
# H200 benchmark run (carried with bin/ and .gl/).
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
$B devices 2>&1 | grep -v XDG
for q in q4_0 q8_0; do $B synth --shape llama-1b --quant $q -o /tmp/m/ 2>&1; done
for q in q4_0 q8_0; do
  for p in 128 512; do
    timeout 200 $B bench -m /tmp/m/llama-1b-$q.gguf --backend webgpu --prompt $p --gen 128 --reps 3 --json 2>&1 | grep -v XDG | tee -a $OUT/bench.jsonl
  done
done

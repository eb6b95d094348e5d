#!/bin/bash
# Session 5's same-run H200 measurements (BENCHMARKS.md "The H200, fifth session"):
# the house A/B (cortiq before and after, --backend webgpu, interleaved, two rounds),
# cortiq --backend cuda on the same files, and the CUDA test binary (parity, faults).
# Through the device tool from the repo root, carry [".devrun", ".gl"], with
#   .devrun/ab/a-before.gz  .devrun/ab/b-after.gz   gzip'd `go build -ldflags "-s -w" ./cmd/native`
#                                                   of the two commits compared
#   .devrun/cudart/cuda.test.gz, driver.test.gz     gzip'd `go test -c ./cuda`, `./cuda/driver`
#   .devrun/cudart/shared/                          the ../shared fixtures the CUDA tests read
# Command: BUDGET=370 bash scripts/bench-house-ab-h200.sh (BUDGET: seconds; round 2 is skipped
# when fewer than 150 are left).
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-400} - ($(date +%s) - T0) )); }
O=$OUT; mkdir -p /tmp/m /tmp/ab
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
for n in a-before b-after; do gunzip -c .devrun/ab/$n.gz > /tmp/ab/$n; chmod +x /tmp/ab/$n; done
B=/tmp/ab/b-after
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee $O/gpu.txt
$B devices 2>&1 | grep -v XDG | head -8
for q in q4_0 q8_0 q4_K_M; do $B synth --shape llama-1b --quant $q -o /tmp/m/ 2>&1 | tail -1 & done; wait
echo "synth done at $(( $(date +%s) - T0 )) s"
bench() { # bin backend file args...
  local n=$1 be=$2 q=$3; shift 3
  echo "{\"bin\":\"$n\",\"backend\":\"$be\",\"file\":\"$q\",\"args\":\"$*\"}" >> $O/runs.jsonl
  timeout 60 /tmp/ab/$n bench -m /tmp/m/llama-1b-$q.gguf --backend $be "$@" --gen 128 --reps 3 --json 2>&1 | grep -v XDG | tail -1 >> $O/runs.jsonl
}
for q in q4_0 q8_0 q4_K_M; do for p in 512 2048; do bench b-after cuda $q --prompt $p; done; done
echo "cuda bench done at $(( $(date +%s) - T0 )) s"
for round in 1 2; do
  for q in q4_0 q8_0 q4_K_M; do for p in 512 2048; do for n in a-before b-after; do
    [ $(left) -gt 150 ] || [ $round = 1 ] || break 3
    bench $n webgpu $q --prompt $p
  done; done; done
  echo "ab round $round done at $(( $(date +%s) - T0 )) s"
  if [ $round = 1 ]; then
    cd .devrun/cudart && gunzip -kf cuda.test.gz driver.test.gz && chmod +x cuda.test driver.test
    ./driver.test -test.v 2>&1 | grep -E "^(---|ok|FAIL)" | head -20
    CORTIQ_SHARED=$PWD/shared timeout 150 ./cuda.test -test.v 2>&1 | grep -v "^=== RUN" > $O/cuda-tests.log
    grep -E "^(--- |ok|FAIL|panic)" $O/cuda-tests.log | head -60; cd ../..
    echo "cuda tests done at $(( $(date +%s) - T0 )) s"
  fi
done
cat $O/runs.jsonl

#!/bin/bash
# H200 benchmarks: run through the device tool from the repo root with
# carry [bin/cortiq.gz, .gl] after `go build -ldflags "-s -w" -o bin/cortiq ./cmd/native &&
# gzip -kf bin/cortiq` (the device tool carries at most 64 MiB; see BENCHMARKS.md).
# Kernel microbenchmarks too when bin/webgpu.test.gz is there
# (`go test -c -ldflags "-s -w" -o bin/webgpu.test ./webgpu && gzip -kf bin/webgpu.test`).
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
[ -f bin/webgpu.test.gz ] && gunzip -kf bin/webgpu.test.gz
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
$B devices 2>&1 | grep -v XDG
for s in llama-1b:q4_0 llama-1b:q8_0 llama-1b:q4_K_M moe-8x:q4_0; do $B synth --shape ${s%:*} --quant ${s#*:} -o /tmp/m/ 2>&1; done
# The SM clock while benchmarks run (short bursty loads may not boost).
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader -lms 200 > $O/clocks.txt 2>&1 &
for m in llama-1b-q4_0 llama-1b-q8_0 llama-1b-q4_K_M moe-8x-q4_0; do
  for args in "--prompt 128" "--prompt 512" "--prompt 2048" "--prompt 128 --greedy-batch 8"; do
    timeout 120 $B bench -m /tmp/m/$m.gguf --backend webgpu $args --gen 128 --reps 3 --json 2>&1 | grep -v XDG | tee -a $O/bench.jsonl
  done
done
kill %1 2>/dev/null
if [ -x bin/webgpu.test ]; then
  # A dependent dispatch and an empty round trip.
  (cd webgpu && ../bin/webgpu.test -test.run xxx -test.benchtime 20x \
    -test.bench 'DispatchShapes/rw-dep/wg1$|RoundTrip' 2>&1 | grep Bench | tee $O/kernels.txt
    # Decode matvecs over distinct weights (from HBM), as the graph runs them.
    for c in q4_0 q8_0 f32; do CORTIQ_MV_BENCH_CODEC=$c ../bin/webgpu.test -test.run xxx -test.benchtime 30x \
      -test.bench 'MatvecVariants/.*/.*/(plain|norm|norm\+act)(-staged-r4s4g1|-staged-r8s2g2)?$' 2>&1 | grep Bench; done | tee -a $O/kernels.txt)
fi
sort $O/clocks.txt | uniq -c | sort -rn | head -5

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
for s in llama-1b:q4_0 llama-1b:q8_0 moe-8x:q4_0; do $B synth --shape ${s%:*} --quant ${s#*:} -o /tmp/m/ 2>&1; done
# The SM clock while benchmarks run (short bursty loads may not boost).
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader -lms 200 > $O/clocks.txt 2>&1 &
for m in llama-1b-q4_0 llama-1b-q8_0 moe-8x-q4_0; do
  for args in "--prompt 128" "--prompt 512" "--prompt 128 --greedy-batch 8"; do
    timeout 120 $B bench -m /tmp/m/$m.gguf --backend webgpu $args --gen 128 --reps 3 --json 2>&1 | grep -v XDG | tee -a $O/bench.jsonl
  done
done
kill %1 2>/dev/null
if [ -x bin/webgpu.test ]; then
  # Decode matvecs: chained dispatches over one weight (L2-hot when it fits
  # in the 50 MB L2) and over 40 distinct weights (from HBM, as in decode).
  (cd webgpu && ../bin/webgpu.test -test.run xxx -test.benchtime 20x \
    -test.bench 'MatmulKernel/(q4_0|q8_0|f32)/(2048x8192|16384x2048|128256x2048)/tb1/r4$|MatvecCold/q4_0/.*/real-r4|DispatchShapes/rw-dep/wg1$|RoundTrip' 2>&1 |
    grep Bench | tee $O/kernels.txt)
fi
sort $O/clocks.txt | uniq -c | sort -rn | head -5

#!/bin/bash
# Issue 13: the seed's q8_2f (a codec with a per-tensor side field) and blr
# (a weight run as two products) on the H200. Run through the device tool
# from the repo root with carry [bin/cortiq.gz, bin/webgpu.test.gz, .gl]
# after
#   go build -ldflags "-s -w" -o bin/cortiq ./cmd/native && gzip -kf bin/cortiq
#   go test -c -ldflags "-s -w" -o bin/webgpu.test ./webgpu && gzip -kf bin/webgpu.test
# (.gl: the Vulkan loader packages, as scripts/bench-h200.sh). It writes
# under $OUT:
#   parity.txt        the device-vs-CPU parity tests of q8_2f and blr on the
#                     real driver (logits within 2e-3; the tests print max |Δ|)
#   bench-side.jsonl  decode/prefill tok/s of the synth llama-1b in q8_2f next
#                     to q8_0 and q8_row (same weights), webgpu then cpu
# blr is left out of the llama-1b benchmark: its encoder (greedy sign
# factorization, float64) takes hours at that size; the parity tests cover
# its kernels (two q1 products).
set -u
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz && chmod +x bin/cortiq
[ -f bin/webgpu.test.gz ] && gunzip -kf bin/webgpu.test.gz && chmod +x bin/webgpu.test
if ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
$B devices 2>&1 | grep -v XDG
if [ -x bin/webgpu.test ]; then
  (cd webgpu && timeout 300 ../bin/webgpu.test -test.v -test.run 'TestParityQ82F|TestParityBLR|TestParityLowbit/q8_2f' 2>&1 | grep -v XDG) | tee $O/parity.txt
fi
mkdir -p /tmp/m
[ -f /tmp/m/llama-1b-f16.gguf ] || timeout 300 $B synth --shape llama-1b --quant f16 -o /tmp/m/ 2>&1
[ -f /tmp/m/llama-1b-q8_0.gguf ] || timeout 300 $B synth --shape llama-1b --quant q8_0 -o /tmp/m/ 2>&1
for q in q8_2f q8_row; do
  [ -f /tmp/m/llama-1b-$q.cmf ] || (time timeout 580 $B import /tmp/m/llama-1b-f16.gguf -o /tmp/m/llama-1b-$q.cmf --quant $q) 2>&1
done
for be in webgpu cpu; do
  for m in llama-1b-q8_0.gguf llama-1b-q8_2f.cmf llama-1b-q8_row.cmf; do
    timeout 300 $B bench -m /tmp/m/$m --backend $be --prompt 128 --gen 128 --reps 3 --json 2>&1 | grep -v XDG | tee -a $O/bench-side.jsonl
  done
done

#!/bin/bash
# Issue 17's facade across backends on the H200: --backend auto races every
# device backend that opens (cuda, webgpu) and the CPU per op class (decode,
# prefill64, one class per layer kind), keeps the fastest decoder and
# remembers the verdicts per engine version + devices + class.
# Run through the device tool from the repo root with carry [bin] after
#   go build -ldflags "-s -w" -o bin/cortiq ./cmd/native && gzip -kf bin/cortiq
# Writes under $OUT: probe.json (the verdicts), devices.txt/.json, probe.log.
# Each run prints its wall time and the GPU memory peak over the base: the
# second auto load (saved verdict) should show one device's upload and a
# shorter load than the first (which races every device, closing each
# loser as soon as it loses decode).
set -u
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz && chmod +x bin/cortiq
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=$O/probe.json
rm -f "$CORTIQ_PROBE_CACHE"
exec > >(tee "$O/probe.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$B devices | grep -E "^(cpu|webgpu|cuda)"
mkdir -p /tmp/m
for s in llama-1b:q4_0 llama-1b:q4_K_M moe-8x:q4_0; do
  $B synth --shape ${s%%:*} --quant ${s##*:} -o /tmp/m/ >/dev/null 2>&1 || echo "synth $s failed"
done
# run times one cortiq run and samples the GPU's memory every 50 ms: the
# peak says how many uploads were held at once (a first auto load holds
# the raced devices' during the decode race only; a load with a saved
# verdict opens its winner alone, a CPU verdict no device at all).
base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
echo "GPU memory in use before any run: $base MiB"
run() { # label, then cortiq run's flags
  local label=$1; shift
  local t0=$(date +%s.%N) peakf=$(mktemp)
  ( p=0; while :; do u=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1); [ "$u" -gt "$p" ] && p=$u && echo $p > $peakf; sleep 0.05; done ) &
  local sampler=$!
  timeout 300 $B run -p "Once upon a time" -n 32 --temp 0 "$@" 2>&1 | grep -E "^\[|unavailable|error|faster than" 
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
  echo "   ($label: $(echo "$t0 $(date +%s.%N)" | awk '{printf "%.1f", $2-$1}') s wall, load included; GPU memory peak $(( $(cat $peakf 2>/dev/null || echo $base) - base )) MiB over the base)"
  rm -f $peakf
}
for s in llama-1b-q4_0 llama-1b-q4_K_M moe-8x-q4_0; do
  m=/tmp/m/$s.gguf
  [ -f $m ] || continue
  echo "== $s"
  run "auto, first load: races" -m $m --backend auto
  run "auto, second load: cached verdicts" -m $m --backend auto
  run "explicit cuda: no race" -m $m --backend cuda
  run "explicit webgpu: no race" -m $m --backend webgpu
  CORTIQ_PROBE=0 run "auto without the probe: first that opens" -m $m --backend auto
done
$B devices | tee "$O/devices.txt" | grep -E "^probe"
$B devices --json > "$O/devices.json"
# Forgetting: one class, then the next auto load measures it again.
$B devices --forget prefill64 2>&1 | tail -1
run "auto after --forget prefill64" -m /tmp/m/llama-1b-q4_0.gguf --backend auto

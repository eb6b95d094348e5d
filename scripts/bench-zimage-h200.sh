#!/bin/bash
# Z-Image-Turbo shapes (random weights, cortiq synth --shape zimage-turbo: ~20 GB of bf16
# matrices) on one H200: cortiq imagine --backend webgpu against diffusers bf16, same noise,
# same run. Run through the device tool from the repo root with carry [bin/cortiq.gz, .gl]
# as bench-h200.sh says, diffusers' source at $DIFFUSERS_SRC (default /work/main/.devrun/diffusers/src).
# SIZE (1024) and STEPS (8) may be lowered to fit the device budget: the first cortiq
# kernels are naive (correctness first), so expect minutes per 1024² image for now.
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
for f in .gl/*.deb; do dpkg -x $f /; done 2>/dev/null; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
M=${MODEL:-/tmp/zimage-turbo-synth}
SIZE=${SIZE:-1024}
STEPS=${STEPS:-8}
PROMPT=${PROMPT:-"a watercolor of a red fox in the snow"}
nvidia-smi --query-gpu=name,memory.total --format=csv
[ -f $M/model_index.json ] || $B synth --shape zimage-turbo -o $M 2>&1 | grep -v XDG
PYTHONPATH=${DIFFUSERS_SRC:-/work/main/.devrun/diffusers/src} python3 scripts/bench_zimage_diffusers.py \
  --model $M --size $SIZE --steps $STEPS --prompt "$PROMPT" --noise $O/zimage-noise.safetensors 2>&1 | tee $O/zimage-diffusers.txt
T=""; [ -x /usr/bin/time ] && T="/usr/bin/time -v"
$T $B imagine -m $M -p "$PROMPT" --backend webgpu --size ${SIZE}x${SIZE} --steps $STEPS \
  --latents $O/zimage-noise.safetensors -o $O/zimage-cortiq.png 2>&1 | grep -v XDG | \
  grep -E 'imagine|Elapsed|Maximum resident' | tee $O/zimage-cortiq.txt

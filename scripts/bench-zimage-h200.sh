#!/bin/bash
# Z-Image-Turbo shapes on one H200, where a step's time goes, beside diffusers bf16.
# Build here first (the device tool carries at most 64 MiB):
#   go test -c -ldflags "-s -w" -o bin/dit.test ./diffusion/device && gzip -kf bin/dit.test
#   go test -c -ldflags "-s -w" -o bin/cudadev.test ./diffusion/cudadev && gzip -kf bin/cudadev.test
#   nvcc -O3 -std=c++17 -cubin -arch=sm_90 -DDIT_GEMM_VARIANTS -o bin/dit.cubin cuda/kernels/dit.cu  # optional:
#     loads in a moment (the embedded PTX is JIT-compiled: tens of seconds) and adds the tilings' comparison
#   go build -ldflags "-s -w" -o bin/cortiq ./cmd/native && gzip -kf bin/cortiq   # only for FULL=1
# then run it through the device tool from the repo root with carry [bin/dit.test.gz, .gl]
# (and bin/cortiq.gz for FULL=1); diffusers' source at $DIFFUSERS_SRC.
#
# 1. cortiq: one DiT evaluation on the device (BenchmarkDiTStep: random weights, every block
#    sharing one block's; no model on disk) at 512² and 1024², f32 and f16 weights, the two GEMM
#    tilings; then one profiled step per size: GPU time per kernel class (gemm/q|k|v|o|w1w3|w2,
#    attention_tiled, rows_norm, norm_add, qk_rope) and dispatches per step.
#    The VAE decoder (BenchmarkVAEDecode, random Flux-VAE weights) at both sizes, tiled and
#    one-invocation-per-output convolutions.
#    The same step on CUDA (diffusion/cudadev: f16 tensor cores, one CUDA graph a step) with
#    the GPU time of each kernel of a layer and its TFLOP/s, the mma.sync ceiling, and memory.
# 2. diffusers bf16: ZImageTransformer2DModel and the VAE decoder alone, same shapes (random
#    weights built on the GPU).
# 3. FULL=1: the whole pipeline as before (cortiq synth writes ~20 GB first: ~4 min), cortiq
#    imagine's phases (text encoder: embeddings on the CPU, layers on the device; steps; VAE
#    decode) against ZImagePipeline;
#    f32 blocks on the device unless DITQ=q8_0 or q4_0.
# Results under $OUT: dit-cuda.txt, dit-cortiq.txt, vae-cortiq.txt, dit-profile.txt, dit-diffusers.jsonl
# (+ zimage-*.txt).
[ -f bin/dit.test.gz ] && gunzip -kf bin/dit.test.gz
[ -f bin/cudadev.test.gz ] && gunzip -kf bin/cudadev.test.gz
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
for f in .gl/*.deb; do dpkg -x $f /; done 2>/dev/null; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
O=${OUT:-/tmp}
SIZES=${SIZES:-"512 1024"}
CODECS=${CODECS:-"f32 f16"}
DIFF=${DIFFUSERS_SRC:-/work/main/.devrun/diffusers/src}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
if [ -x bin/cudadev.test ]; then
  MODARGS=""; VARS=""
  [ -f bin/dit.cubin ] && MODARGS="-cudadev.module $PWD/bin/dit.cubin" && VARS="-dit.variants"
  (cd diffusion/cudadev && ../../bin/cudadev.test -test.run 'TestKernelsGPU|TestDiTRunner$' -test.v $MODARGS 2>&1 |
    grep -v '^=== RUN')
  for s in $SIZES; do
    echo "== cortiq CUDA DiT step: ${s}²"
    timeout ${TMO:-240} bin/cudadev.test -test.run '^$' -test.bench DiTStep -test.benchtime ${REPS:-3}x \
      -dit.shape ${SHAPE:-zimage-turbo} -dit.size $s $MODARGS $VARS 2>&1 | grep -v '^goos\|^goarch\|^pkg\|^cpu'
  done
fi 2>&1 | tee $O/dit-cuda.txt
T=bin/dit.test
bench() { timeout ${TMO:-240} $T -test.run '^$' -test.bench DiTStep -test.benchtime ${REPS:-3}x \
  -dit.shape ${SHAPE:-zimage-turbo} "$@" 2>&1 | grep -v XDG; }
if [ -x $T ]; then
  for s in $SIZES; do for c in $CODECS; do for g in "" large; do
    echo "== cortiq DiT step: ${s}², $c weights, gemm ${g:-default}"
    bench -dit.size $s -dit.codec $c -dit.gemm "$g" | grep -E 'Benchmark|bench_test'
  done; done; done | tee $O/dit-cortiq.txt
  for s in $SIZES; do for n in false true; do
    echo "== cortiq VAE decode: ${s}², naive convolutions $n"
    timeout ${TMO:-240} $T -test.run '^$' -test.bench VAEDecode -test.benchtime 2x -dit.shape ${SHAPE:-zimage-turbo} \
      -dit.size $s -vae.naive=$n 2>&1 | grep -E 'Benchmark|bench|vae_conv'
  done; done | tee $O/vae-cortiq.txt
  for s in $SIZES; do
    echo "== profiled ${s}² step (f16 weights; one pass per dispatch, so slower than above)"
    REPS=1 bench -dit.size $s -dit.codec f16 -dit.profile | grep -v '^goos\|^goarch\|^pkg\|^cpu\|^PASS'
  done | tee $O/dit-profile.txt
fi
PYTHONPATH=$DIFF timeout 300 python3 scripts/bench_zimage_dit_diffusers.py --sizes "${SIZES// /,}" 2>&1 | \
  grep -v Warning | tee $O/dit-diffusers.jsonl
[ "$FULL" = 1 ] || exit 0

B=${CORTIQ:-./bin/cortiq}
M=${MODEL:-/tmp/zimage-turbo-synth}
SIZE=${SIZE:-1024}
STEPS=${STEPS:-8}
PROMPT=${PROMPT:-"a watercolor of a red fox in the snow"}
[ -f $M/model_index.json ] || $B synth --shape zimage-turbo -o $M 2>&1 | grep -v XDG
PYTHONPATH=$DIFF python3 scripts/bench_zimage_diffusers.py \
  --model $M --size $SIZE --steps $STEPS --prompt "$PROMPT" --noise $O/zimage-noise.safetensors 2>&1 | tee $O/zimage-diffusers.txt
T=""; [ -x /usr/bin/time ] && T="/usr/bin/time -v"
$T $B imagine -m $M -p "$PROMPT" --backend webgpu ${DITQ:+--dit-quant $DITQ} --size ${SIZE}x${SIZE} --steps $STEPS \
  --latents $O/zimage-noise.safetensors -o $O/zimage-cortiq.png 2>&1 | grep -v XDG | tr '\r' '\n' | \
  grep -E 'imagine: (loaded|phases|wrote)|Elapsed|Maximum resident' | tee $O/zimage-cortiq.txt
$T $B imagine -m $M -p "$PROMPT" --backend cuda --size ${SIZE}x${SIZE} --steps $STEPS \
  --latents $O/zimage-noise.safetensors -o $O/zimage-cuda.png 2>&1 | grep -v XDG | tr '\r' '\n' | \
  grep -E 'imagine: (loaded|phases|wrote)|Elapsed|Maximum resident' | tee $O/zimage-cuda.txt

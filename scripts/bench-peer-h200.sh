#!/bin/bash
# Same-run peer benchmarks on the H200 machine (issues 17 and 18), through the
# device tool from the repo root with carry [".devrun", ".gl"]:
#   .devrun/llamacpp-src.tgz  llama.cpp source (git archive of an upstream commit:
#                             CMakeLists.txt cmake common ggml include src tools vendor licenses)
#   .devrun/ab/NAME.gz        cortiq binaries to compare (gzip'd; e.g. before.gz after.gz)
# Stages (run them in one warm lease, in order; each writes under $OUT):
#   build  llama.cpp with CUDA (llama-bench, llama-quantize) into /tmp/lc/b (~5 min)
#   peer   synth the llama-1b files with the first binary, llama-bench them
#   ab     every binary in .devrun/ab on the same files, interleaved A B A B
#   cuda   the newest binary with --backend cuda on the same files
#   types  per GGUF type (issue 13): synth with the newest binary, llama-bench decode beside
#          cortiq webgpu (and cuda where it runs the type); TYPES overrides the list
#   export gzip llama-bench and llama-quantize into $OUT (so a cold machine can skip the build)
set -u
O=${OUT:-/tmp}; mkdir -p /tmp/m /tmp/ab
if ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
for z in .devrun/ab/*.gz; do [ -f "$z" ] || continue; n=$(basename $z .gz); [ -x /tmp/ab/$n ] || { gunzip -c $z > /tmp/ab/$n; chmod +x /tmp/ab/$n; }; done
BINS=$(ls /tmp/ab 2>/dev/null)
FIRST=/tmp/ab/$(echo $BINS | awk '{print $NF}')
FILES=${FILES:-"q4_0 q8_0 q4_K_M"}
for stage in "$@"; do case $stage in
build)
  mkdir -p /tmp/lc && tar xzf .devrun/llamacpp-src.tgz -C /tmp/lc && cd /tmp/lc &&
  cmake -B b -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF > $O/lc-cmake.log 2>&1 &&
  cmake --build b --target llama-bench llama-quantize -j16 > $O/lc-build.log 2>&1; echo "llama.cpp build rc=$?"; tail -3 $O/lc-build.log; cd - >/dev/null ;;
peer)
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee $O/gpu.txt
  for q in $FILES; do [ -f /tmp/m/llama-1b-$q.gguf ] || $FIRST synth --shape llama-1b --quant $q -o /tmp/m/ 2>&1 | tail -1; done
  for q in $FILES; do
    /tmp/lc/b/bin/llama-bench -m /tmp/m/llama-1b-$q.gguf -ngl 99 -fa 1 -p 512,2048 -n 128 -r 3 -o jsonl 2>/dev/null | tee -a $O/llamacpp.jsonl
    /tmp/lc/b/bin/llama-bench -m /tmp/m/llama-1b-$q.gguf -ngl 99 -fa 1 -p 0 -n 128 -d 2048 -r 3 -o jsonl 2>/dev/null | tee -a $O/llamacpp.jsonl
  done ;;
ab)
  for q in $FILES; do [ -f /tmp/m/llama-1b-$q.gguf ] || $FIRST synth --shape llama-1b --quant $q -o /tmp/m/ 2>&1 | tail -1; done
  for round in 1 2; do for q in $FILES; do for n in $BINS; do
    for args in "--prompt 512 --gen 128" "--prompt 2048 --gen 128"; do
      echo "{\"bin\":\"$n\",\"round\":$round,\"file\":\"$q\",\"args\":\"$args\"}" >> $O/ab.jsonl
      timeout 120 /tmp/ab/$n bench -m /tmp/m/llama-1b-$q.gguf --backend ${AB_BACKEND:-webgpu} $args --reps 3 --json 2>&1 | grep -v XDG | tee -a $O/ab.jsonl
    done; done; done; done ;;
cuda)
  for q in $FILES; do for args in "--prompt 512 --gen 128" "--prompt 2048 --gen 128"; do
    timeout 120 $FIRST bench -m /tmp/m/llama-1b-$q.gguf --backend cuda $args --reps 3 --json 2>&1 | grep -v XDG | tee -a $O/cuda.jsonl
  done; done ;;
types)
  TYPES=${TYPES:-"q4_1 q5_0 q5_1 q2_K q3_K q5_K iq4_nl iq4_xs tq2_0 mxfp4 q3_K_M q5_K_M"}
  for q in $TYPES; do [ -f /tmp/m/llama-1b-$q.gguf ] || timeout 200 $FIRST synth --shape llama-1b --quant $q -o /tmp/m/ 2>&1 | tail -1; done
  for q in $TYPES; do
    /tmp/lc/b/bin/llama-bench -m /tmp/m/llama-1b-$q.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o jsonl 2>/dev/null | tee -a $O/llamacpp-types.jsonl
    for be in ${TYPE_BACKENDS-webgpu cuda}; do
      timeout 100 $FIRST bench -m /tmp/m/llama-1b-$q.gguf --backend $be --prompt 512 --gen 128 --reps 3 --json 2>&1 | grep -v XDG | tail -1 | tee -a $O/cortiq-types.jsonl
    done
  done ;;
export)
  for t in llama-bench llama-quantize; do [ -x /tmp/lc/b/bin/$t ] && gzip -c /tmp/lc/b/bin/$t > $O/$t.gz; done; ls -la $O ;;
esac; done

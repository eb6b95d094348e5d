#!/bin/bash
# Issue 13 (wgsl13): the GGUF types the device holds as q4_0's planes
# (q4_1, q5_0, q5_1, iq4_nl, iq4_xs, mxfp4, tq1_0, tq2_0), beside q4_0, on
# the H200. Build here, from the repo root:
#   go build -ldflags "-s -w" -o bin/cortiq ./cmd/native && gzip -kf bin/cortiq
#   go test -c -ldflags "-s -w" -o bin/webgpu.test ./webgpu && gzip -kf bin/webgpu.test
# then run through the device tool from the repo root with carry
# [bin/cortiq.gz, bin/webgpu.test.gz, .gl], one part a call (each fits the
# 10-minute limit):
#   PART=kernels scripts/bench-wgsl-codecs.sh  decode matvecs per codec (about 3 min)
#   PART=decode  scripts/bench-wgsl-codecs.sh  decode tok/s per type (synth files, bench-gguf-types.sh)
#   PART=staged  scripts/bench-wgsl-codecs.sh  the same with CORTIQ_MATVEC=all (the staged matvec
#                                              for every codec, an A/B for Tuning.stagedCodec)
# Writes $OUT/kernels-codecs.txt, $OUT/bench-types.jsonl ($OUT/staged/ for PART=staged).
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
[ -f bin/webgpu.test.gz ] && gunzip -kf bin/webgpu.test.gz
if ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
O=${OUT:-/tmp}
CODECS=${CODECS:-"q4_0 iq4_nl iq4_xs mxfp4 tq2_0 tq1_0 q4_1 q5_0 q5_1"}
case ${PART:-kernels} in
kernels)
  # llama-1b's decode matvecs over distinct weights (from HBM), as the graph
  # runs them: the row-blocked kernel (plain, and with the fused norm and
  # gated activation) and two staged shapes. us/matvec per shape; GB/s
  # counts each codec's device bytes.
  (cd webgpu && for c in $CODECS; do CORTIQ_MV_BENCH_CODEC=$c ../bin/webgpu.test -test.run xxx -test.benchtime 30x \
    -test.bench 'MatvecVariants/.*/.*/(plain|norm\+act)(-staged-r4s4g1|-staged-r8s2g2)?$' 2>&1 | grep Bench; done) | tee $O/kernels-codecs.txt
  ;;
decode)
  TYPES="$CODECS" BACKENDS=webgpu scripts/bench-gguf-types.sh
  ;;
staged)
  mkdir -p $O/staged
  CORTIQ_MATVEC=all OUT=$O/staged TYPES="$CODECS" BACKENDS=webgpu scripts/bench-gguf-types.sh
  ;;
esac

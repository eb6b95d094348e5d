#!/bin/bash
# CPU engine against llama.cpp's CPU build on the H200 machine's host cores
# (issue 16: 2 and 16 threads, the same synth files, interleaved A B A B),
# and cortiq binaries against each other (before/after a change). Through
# the device tool from the repo root with carry [".devrun"]:
#   .devrun/llamacpp-src.tgz  llama.cpp source (git archive of an upstream commit:
#                             CMakeLists.txt cmake common ggml include src tools vendor licenses)
#   .devrun/ab/NAME.gz        cortiq binaries (gzip'd, `go build -ldflags "-s -w" ./cmd/native`;
#                             e.g. main.gz cpu16.gz); the last in ls order synthesizes the files
# Stages (one warm lease, in order; each appends JSON lines under $OUT):
#   build  llama.cpp CPU-only (GGML_NATIVE: AVX-512/VNNI/AMX as the host has) into /tmp/lcc/b (~2 min)
#   files  synth qwen-0.5b and llama-1b at q4_0, q8_0, q4_K_M into /tmp/m
#   run    per thread count (THREADS, default "16 2"), ROUNDS rounds (default 1), per file:
#          read bandwidth, each cortiq binary (bench --backend cpu), llama-bench -t T
#   prof   CPU profiles of binary PROF (default: the first not named main) at the first of
#          THREADS: prefill (prompt 128) and decode (64 tokens) of qwen-0.5b and llama-1b q4_0
#          (pf-*.prof, dec-*.prof under $OUT)
#   final  the issue-16 lease in one command (~7-8 min with two binaries): build, files, every
#          file at 16 threads, q4_0 at 8 threads, profiles, then the profiles and logs packed
#          into prof-logs.tgz; on this side `python3 scripts/cpu-bench-table.py cpu.jsonl`
#          prints the table (ratios to llama.cpp). A second call for the rest of the sweep:
#          THREADS="4 2 1" QUANTS=q4_0 bash scripts/cpu-bench-h200.sh files run (~3 min).
#          Carry [".devrun/ab", ".devrun/llamacpp-src.tgz"] (the whole .devrun is over 64 MiB).
# Example: bash scripts/cpu-bench-h200.sh build files run   (about 7 min with two binaries;
# QUANTS=q4_0 halves it; a second command with ROUNDS=1 again gives the A B A B)
set -u
O=${OUT:-/tmp}; mkdir -p /tmp/m /tmp/ab
for z in .devrun/ab/*.gz; do [ -f "$z" ] || continue; n=$(basename $z .gz); [ -x /tmp/ab/$n ] && [ /tmp/ab/$n -nt $z ] || { gunzip -c $z > /tmp/ab/$n; chmod +x /tmp/ab/$n; }; done
BINS=$(ls /tmp/ab 2>/dev/null)
LAST=/tmp/ab/$(echo $BINS | awk '{print $NF}')
SHAPES=${SHAPES:-"qwen-0.5b llama-1b"}
QUANTS=${QUANTS:-"q4_0 q8_0 q4_K_M"}
THREADS=${THREADS:-"16 2"}
ROUNDS=${ROUNDS:-1}
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
log() { echo "{\"note\":\"$*\",\"time\":\"$(date -u +%FT%TZ)\",\"load\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}" | tee -a $O/cpu.jsonl; }
for stage in "$@"; do case $stage in
build)
  lscpu > $O/lscpu.txt
  mkdir -p /tmp/lcc && tar xzf .devrun/llamacpp-src.tgz -C /tmp/lcc && cd /tmp/lcc &&
  cmake -B b -G Ninja -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DGGML_OPENMP=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF > $O/lcc-cmake.log 2>&1 &&
  cmake --build b --target llama-bench -j$(nproc) > $O/lcc-build.log 2>&1; echo "llama.cpp build rc=$?"; tail -3 $O/lcc-build.log; cd - >/dev/null ;;
files)
  for s in $SHAPES; do for q in $QUANTS; do
    [ -f /tmp/m/$s-$q.gguf ] || $LAST synth --shape $s --quant $q -o /tmp/m/ 2>&1 | tail -1
  done; done ;;
run)
  for T in $THREADS; do for round in $(seq $ROUNDS); do
    log "threads $T round $round bandwidth"
    GOMAXPROCS=$T $LAST bench --bandwidth --json 2>/dev/null | tee -a $O/cpu.jsonl
    for s in $SHAPES; do for q in $QUANTS; do f=/tmp/m/$s-$q.gguf; [ -f $f ] || continue
      for n in $BINS; do
        log "threads $T round $round cortiq $n $s-$q"
        GOMAXPROCS=$T timeout 150 /tmp/ab/$n bench -m $f --backend cpu --prompt 64 --gen 32 --reps 2 --json 2>/dev/null | tee -a $O/cpu.jsonl
      done
      if [ -x /tmp/lcc/b/bin/llama-bench ]; then
        log "threads $T round $round llama.cpp $s-$q"
        timeout 150 /tmp/lcc/b/bin/llama-bench -m $f -t $T -p 64 -n 32 -r 2 -o jsonl 2>/dev/null | tee -a $O/cpu.jsonl
      fi
    done; done
  done; done ;;
prof)
  T=$(echo $THREADS | awk '{print $1}')
  P=/tmp/ab/${PROF:-$(ls /tmp/ab | grep -vx main | head -1)}; [ -x "$P" ] || P=$LAST
  for f in qwen-0.5b-q4_0 llama-1b-q4_0; do [ -f /tmp/m/$f.gguf ] || continue
    GOMAXPROCS=$T timeout 60 $P bench -m /tmp/m/$f.gguf --backend cpu --prompt 128 --gen 0 --reps 3 --cpuprofile $O/pf-$f.prof > /dev/null 2>&1
    GOMAXPROCS=$T timeout 60 $P bench -m /tmp/m/$f.gguf --backend cpu --prompt 1 --gen 64 --reps 2 --cpuprofile $O/dec-$f.prof > /dev/null 2>&1
  done ;;
final)
  bash $0 build files
  THREADS=16 bash $0 run
  THREADS=8 QUANTS=q4_0 bash $0 run
  THREADS=16 bash $0 prof
  # the device tool brings back at most 8 files: profiles and logs in one
  (cd $O && tar czf prof-logs.tgz *.prof *.log lscpu.txt 2>/dev/null && rm -f *.prof *.log lscpu.txt) ;;
esac; done

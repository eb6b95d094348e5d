#!/bin/bash
# Issue 14 on the H200: what speculative verification costs on the device
# (the k+1-token verify as one small step, webgpu/small.go) and what the
# governor keeps of plain decoding. Run from the repo root through the
# device tool like bench-h200.sh, carry [bin/cortiq.gz, bin/webgpu.test.gz,
# bin/stories260K.gguf, .gl] after
#   go build -ldflags "-s -w" -o bin/cortiq ./cmd/native && gzip -kf bin/cortiq
#   go test -c -ldflags "-s -w" -o bin/webgpu.test ./webgpu && gzip -kf bin/webgpu.test
# and `cp ../shared/fixtures/models/stories260K.gguf bin/` (carried with
# bin/; STORIES overrides). ~5 minutes with REPS=2 (the default).
#
# Writes $OUT/verify.txt (the kernel-level step times) and
# $OUT/verify.jsonl (one line per run: decode_tok_s, the ratio to plain
# decoding in the same call, the speculation statistics), then prints the
# summary. The acceptance lines:
#   - "verify-5" close to "decode" in verify.txt (the verify of the last
#     token and 4 drafts costs about one decode step; "-off" is the path
#     before, the prefill kernels);
#   - "synth-draft governed" >= 0.9 of "plain" (a draft whose tokens are
#     never accepted: the governor pauses it);
#   - "self k4 governed" on stories260K >= 0.9 of its plain (the
#     governor's loss on draft-itself runs, 0.39 before).
# CORTIQ_SMALL_STEPS=off runs are the same cases on the old path, for the
# A/B in one call; CORTIQ_SMALL_ROWS=2|8 the batched matvec's rows.
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
[ -f bin/webgpu.test.gz ] && gunzip -kf bin/webgpu.test.gz
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x $f /; done; ldconfig 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
S=${STORIES:-bin/stories260K.gguf}
[ -f $S ] || S=../shared/fixtures/models/stories260K.gguf
: > $O/verify.jsonl

# 1. The step itself: a verify of N tokens against one decode step, on a
# 1B-llama-shaped q4_0 model at a depth of 256.
if [ -x bin/webgpu.test ]; then
  (cd webgpu && CORTIQ_BENCH_DIMS=2048,8192,16,32,8,128256 ../bin/webgpu.test -test.run XXX \
    -test.bench VerifyStep -test.benchtime 200x 2>&1 | grep -E 'Bench|FAIL|panic') | tee $O/verify.txt
fi

# 2. Whole runs. run LABEL ENV -- run's arguments (ENV: VAR=value or -).
run() {
  l=$1 e=$2; shift 2
  [ "$e" = - ] && e=
  env $e timeout 300 $B run --temp 0 --ignore-eos --json --backend webgpu "$@" 2>/dev/null | tail -1 |
    python3 -c "
import json,sys
d=json.load(sys.stdin); s=d.get('spec') or {}
print(json.dumps({'case': '$l', 'env': '$e', 'decode_tok_s': round(d['decode_tok_s'],1), 'acceptance': s.get('acceptance_rate'),
  'tokens_per_step': s.get('tokens_per_step'), 'spec_tok_s': s.get('spec_tok_s'), 'plain_tok_s': s.get('plain_tok_s'),
  'plain_tokens': s.get('plain_tokens'), 'paused': s.get('paused'), 'submits_per_token': d.get('submits_per_token')}))" >> $O/verify.jsonl
}
$B synth --shape llama-1b --quant q4_0 -o /tmp/m/ >/dev/null 2>&1
$B synth --shape llama-1b-draft --quant q8_0 -o /tmp/m/ >/dev/null 2>&1
T=/tmp/m/llama-1b-q4_0.gguf
D=/tmp/m/llama-1b-draft-q8_0.gguf
for rep in $(seq ${REPS:-2}); do
  run "plain" - -m $T --ids 1,2,3,4,5,6,7,8 -n 512
  for e in - CORTIQ_SMALL_STEPS=off; do
    run "draft=target k4 always" $e -m $T --ids 1,2,3,4,5,6,7,8 -n 512 --draft $T --draft-k 4 --spec-always
    run "synth-draft k4 always" $e -m $T --ids 1,2,3,4,5,6,7,8 -n 512 --draft $D --draft-k 4 --spec-always
    run "synth-draft governed" $e -m $T --ids 1,2,3,4,5,6,7,8 -n 512 --draft $D --draft-k 4
    run "ngram always" $e -m $T --ids 1,2,3,4,5,6,7,8 -n 512 --spec ngram --spec-always
  done
  run "draft=target k4 governed" - -m $T --ids 1,2,3,4,5,6,7,8 -n 512 --draft $T --draft-k 4
  run "ngram governed" - -m $T --ids 1,2,3,4,5,6,7,8 -n 512 --spec ngram
  for r in 2 8; do
    run "draft=target k4 always" CORTIQ_SMALL_ROWS=$r -m $T --ids 1,2,3,4,5,6,7,8 -n 512 --draft $T --draft-k 4 --spec-always
  done
  # stories260K continuing its own story, itself as the draft.
  run "stories plain" - -m $S -p "Once upon a time" -n 512
  for k in 4 8; do
    run "stories self k$k governed" - -m $S -p "Once upon a time" -n 512 --draft $S --draft-k $k
    run "stories self k$k always" - -m $S -p "Once upon a time" -n 512 --draft $S --draft-k $k --spec-always
  done
  run "stories ngram governed" - -m $S -p "Once upon a time" -n 512 --spec ngram
done

# The summary: each run beside plain decoding of its model in the same rep.
python3 - $O/verify.jsonl <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
plain = None
for r in rows:
    if r['case'] in ('plain', 'stories plain'):
        plain = r['decode_tok_s']
    ratio = r['decode_tok_s'] / plain if plain else 0
    print(f"{r['case']:28} {r['env']:24} {r['decode_tok_s']:8.1f} tok/s  {ratio:5.2f}x plain  "
          f"acc {r['acceptance']}  tok/step {r['tokens_per_step']}  paused {r['paused']}  plain_tokens {r['plain_tokens']}")
EOF

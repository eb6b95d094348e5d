#!/bin/bash
# Speculative decoding (issue 14): decode tok/s plain, with --spec ngram and
# with a draft, on the device and the CPU. Run from the repo root like
# bench-h200.sh (same carry: bin/cortiq.gz, .gl), STORIES pointing at
# stories260K.gguf. Each line is run --json's final object: decode_tok_s is
# the effective rate, spec.acceptance_rate the share of drafts kept.
# Speculation is governed (it pauses while it measures slower than plain
# decoding: paused, plain_tokens, disabled_reason); the --spec-always cases
# time speculation at every step, its raw cost.
[ -f bin/cortiq.gz ] && gunzip -kf bin/cortiq.gz
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x $f /; done; ldconfig 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $VK_DRIVER_FILES ] || unset VK_DRIVER_FILES
export CORTIQ_CACHE=/tmp/cc CORTIQ_PROBE_CACHE=0
B=${CORTIQ:-./bin/cortiq}
O=${OUT:-/tmp}
S=${STORIES:-../shared/fixtures/models/stories260K.gguf}
BACKENDS=${BACKENDS:-"webgpu cpu"}
run() { # label, then run's arguments
  l=$1; shift
  timeout 300 $B run --temp 0 --ignore-eos --json "$@" 2>/dev/null | tail -1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); s=d.get('spec') or {}; print(json.dumps({'case': '$l', 'backend': d['backend'], 'decode_tok_s': round(d['decode_tok_s'],1), 'acceptance': s.get('acceptance_rate'), 'tokens_per_step': s.get('tokens_per_step'), 'submits_per_token': d.get('submits_per_token'), 'spec_tok_s': s.get('spec_tok_s'), 'plain_tok_s': s.get('plain_tok_s'), 'plain_tokens': s.get('plain_tokens'), 'paused': s.get('paused'), 'disabled_reason': s.get('disabled_reason')}))" | tee -a $O/spec.jsonl
}
$B synth --shape llama-1b --quant q4_0 -o /tmp/m/ >/dev/null 2>&1
$B synth --shape llama-1b --quant q8_0 -o /tmp/m/ >/dev/null 2>&1
for be in $BACKENDS; do
  # stories260K continuing its own story: repetitive real text.
  for spec in "" "--spec ngram" "--spec ngram --spec-always" "--draft $S --draft-k 4" "--draft $S --draft-k 4 --spec-always" "--draft $S --draft-k 8"; do
    run "stories $spec" -m $S --backend $be -p "Once upon a time" -n 512 $spec
  done
  # A synth target: prompt lookup on random text (nothing to find or
  # accept: the cost of verification) and a synth draft.
  T=/tmp/m/llama-1b-q4_0.gguf
  for spec in "" "--spec ngram" "--spec ngram --spec-always" "--draft /tmp/m/llama-1b-q8_0.gguf --draft-k 4" "--draft /tmp/m/llama-1b-q8_0.gguf --draft-k 4 --spec-always" "--draft $T --draft-k 4 --spec-always"; do
    run "synth $spec" -m $T --backend $be --ids 1,2,3,4,5,6,7,8 -n 256 $spec
  done
done

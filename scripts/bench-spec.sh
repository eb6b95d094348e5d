#!/bin/bash
# Speculative decoding (issue 14): decode tok/s plain, with --spec ngram and
# with a draft, on the device and the CPU. Run from the repo root like
# bench-h200.sh (same carry: bin/cortiq.gz, .gl), STORIES pointing at
# stories260K.gguf. Each line is run --json's final object: decode_tok_s is
# the effective rate, spec.acceptance_rate the share of drafts kept.
# Speculation is governed (it pauses while it measures slower than plain
# decoding: paused, plain_tokens, disabled_reason); the --spec-always cases
# time speculation at every step, its raw cost.
#
# CASES picks the sets (default "stories synth never"). "never" is the
# governor's worst case: the llama-1b q4_0 target with a synth draft of
# another shape (llama-1b-draft q8_0: its vocabulary, other weights), whose
# drafts are never accepted, governed, beside plain decoding in the same
# call, REPS times alternating (A B A B), over 128 and 512 tokens; the
# summary prints each governed median against the plain median (the aim:
# >= 0.9; verify steps and drafted tokens stay a handful).
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
    python3 -c "import json,sys; d=json.load(sys.stdin); s=d.get('spec') or {}; print(json.dumps({'case': '$l', 'backend': d['backend'], 'decode_tok_s': round(d['decode_tok_s'],1), 'acceptance': s.get('acceptance_rate'), 'tokens_per_step': s.get('tokens_per_step'), 'steps': s.get('steps'), 'drafted': s.get('drafted'), 'submits_per_token': d.get('submits_per_token'), 'spec_tok_s': s.get('spec_tok_s'), 'plain_tok_s': s.get('plain_tok_s'), 'plain_tokens': s.get('plain_tokens'), 'paused': s.get('paused'), 'disabled_reason': s.get('disabled_reason')}))" | tee -a $O/spec.jsonl
}
CASES=${CASES:-"stories synth never"}
want() { case " $CASES " in *" $1 "*) return 0;; esac; return 1; }
$B synth --shape llama-1b --quant q4_0 -o /tmp/m/ >/dev/null 2>&1
want synth && $B synth --shape llama-1b --quant q8_0 -o /tmp/m/ >/dev/null 2>&1
want never && $B synth --shape llama-1b-draft --quant q8_0 -o /tmp/m/ >/dev/null 2>&1
for be in $BACKENDS; do
 if want never; then
  for rep in $(seq ${REPS:-3}); do
    for n in 128 512; do
      run "never plain n$n" -m /tmp/m/llama-1b-q4_0.gguf --backend $be --ids 1,2,3,4,5,6,7,8 -n $n
      run "never governed n$n" -m /tmp/m/llama-1b-q4_0.gguf --backend $be --ids 1,2,3,4,5,6,7,8 -n $n --draft /tmp/m/llama-1b-draft-q8_0.gguf --draft-k 4
    done
  done
 fi
 if want stories; then
  # stories260K continuing its own story: repetitive real text.
  for spec in "" "--spec ngram" "--spec ngram --spec-always" "--draft $S --draft-k 4" "--draft $S --draft-k 4 --spec-always" "--draft $S --draft-k 8"; do
    run "stories $spec" -m $S --backend $be -p "Once upon a time" -n 512 $spec
  done
 fi
 if want synth; then
  # A synth target: prompt lookup on random text (nothing to find or
  # accept: the cost of verification) and a synth draft.
  T=/tmp/m/llama-1b-q4_0.gguf
  for spec in "" "--spec ngram" "--spec ngram --spec-always" "--draft /tmp/m/llama-1b-q8_0.gguf --draft-k 4" "--draft /tmp/m/llama-1b-q8_0.gguf --draft-k 4 --spec-always" "--draft $T --draft-k 4 --spec-always"; do
    run "synth $spec" -m $T --backend $be --ids 1,2,3,4,5,6,7,8 -n 256 $spec
  done
 fi
done
# The worst case's summary: medians, governed against plain.
want never && python3 - $O/spec.jsonl <<'EOF'
import json, sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r['case'].startswith('never '):
        d[(r['backend'], r['case'])].append(r)
for (be, case), rs in sorted(d.items()):
    if 'governed' not in case:
        continue
    pl = d.get((be, case.replace('governed', 'plain')), [])
    g = st.median(r['decode_tok_s'] for r in rs)
    p = st.median(r['decode_tok_s'] for r in pl) if pl else 0
    print(f"{be} {case}: {g:.1f} tok/s, plain {p:.1f}: {g / p if p else 0:.3f}x plain; per run (steps, drafted, plain_tokens, paused): "
          f"{[(r.get('steps'), r.get('drafted'), r.get('plain_tokens'), r.get('paused')) for r in rs]}")
EOF

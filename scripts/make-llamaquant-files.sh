#!/usr/bin/env bash
# Regenerates cpu/testdata/llamaquant: GGUF files written by llama.cpp's own
# llama-quantize with its recipes (issue 13: "in the mixes llama.cpp's
# llama-quantize recipes produce"), and MANIFEST.tsv, the tensor types
# llama-quantize printed for each file (cpu.TestLlamaQuantFiles and
# webgpu.TestLlamaQuantFiles check the files against it).
#
# llama.cpp: the upstream source of 2026-05-16 (a `git archive` of that day's
# commit, as /work/llamacpp-src.tgz on the dev machine, sha256
# 193accafd386ba189a38f0ffe13bf66b069061d29b54177f94f55a780a20d671; upstream commit 0253fb21f:
# `git archive 0253fb21f CMakeLists.txt cmake common ggml include src tools vendor licenses`
# in the fetchable mirror kmbandy/llama.cpp, whose own commits come after it), built CPU only:
#   cmake -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
#     -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
#     -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF
#   cmake --build b --target llama-quantize llama-imatrix -j2
#
# Sources (float32, so each file is one rounding from the float weights):
#   stories260K  ../shared/fixtures/models/stories260K.gguf, a trained llama
#                (hidden 64, FFN 172, vocab 512): no matrix is a multiple of
#                256 wide, so the K- and IQ-quants fall back the way they do
#                for Qwen2.5-0.5B's 896 (Q5_0/Q5_1/Q8_0/IQ4_NL, and F16 where
#                172 is not a multiple of 32 either).
#   lq256        a two-layer random llama, every matrix 256 wide, untied
#                (cpu/testdata/llamaquant/gensrc), where every recipe applies
#                as written; the IQ1/IQ2/IQ3 recipes quantize with an
#                importance matrix llama-imatrix computes on a short text.
#   gpt_oss_e8   the tiny gpt-oss (MXFP4_MOE only).
#
# usage: scripts/make-llamaquant-files.sh LLAMA_BUILD_BIN_DIR
# (run from the repository root; needs ../shared and Go).
set -euo pipefail
BIN=${1:?usage: $0 LLAMA_BUILD_BIN_DIR (the folder holding llama-quantize)}
OUTDIR=cpu/testdata/llamaquant
SHARED=${SHARED:-../shared}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

go run ./cpu/testdata/llamaquant/gensrc "$TMP/lq256-f32.gguf"
cp "$SHARED/fixtures/models/stories260K.gguf" "$TMP/stories260K-f32.gguf"
# gpt_oss_e8: the committed tiny gpt-oss (fixtures/testdata/tiny), written
# as a float32 GGUF by cortiq, for the MXFP4_MOE recipe (MXFP4 experts,
# Q8_0 attention).
go run ./cmd/native import fixtures/testdata/tiny/gpt_oss_e8 -o "$TMP/gpt_oss_e8-f32.gguf"

# A short text for llama-imatrix (the lq256 vocabulary has letters and
# bytes, so any ASCII tokenizes).
for i in $(seq 1 40); do
  echo "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog $i."
done > "$TMP/calib.txt"
for src in lq256 stories260K; do
  "$BIN/llama-imatrix" -m "$TMP/$src-f32.gguf" -f "$TMP/calib.txt" -o "$TMP/$src.imatrix" \
    -c 64 -b 64 -t 2 --no-ppl >"$TMP/$src-imatrix.log" 2>&1 ||
    { cat "$TMP/$src-imatrix.log"; exit 1; }
done

RECIPES="Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS TQ1_0 TQ2_0"
IRECIPES="IQ3_XXS IQ3_S IQ3_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ1_S IQ1_M"
rm -f "$OUTDIR"/*.gguf
manifest="$OUTDIR/MANIFEST.tsv"
{
  echo "# file<TAB>tensors per ggml type, as llama-quantize printed them (scripts/make-llamaquant-files.sh)"
} >"$manifest"
for src in stories260K lq256 gpt_oss_e8; do
  recipes="$RECIPES $IRECIPES"
  [ $src = gpt_oss_e8 ] && recipes=MXFP4_MOE
  for r in $recipes; do
    out="$OUTDIR/$src-$r.gguf"
    im=()
    case " $IRECIPES " in *" $r "*) im=(--imatrix "$TMP/$src.imatrix") ;; esac
    if ! "$BIN/llama-quantize" "${im[@]}" "$TMP/$src-f32.gguf" "$out" "$r" 2 >"$TMP/q.log" 2>&1; then
      echo "llama-quantize refused $src $r:"; grep -iE "error|refus|fail|abort" "$TMP/q.log" | head -5
      rm -f "$out"
      continue
    fi
    # Each tensor's record starts "[  i/  n] name - [dims], type = T, " and
    # goes on "converting to U .. size …" (imatrix notes may come between,
    # on lines of their own) or "size = …" when it stays as it is.
    types=$(tr '\n' ' ' <"$TMP/q.log" | sed -E 's/\[ *[0-9]+\/ *[0-9]+\]/\n&/g' |
      grep -E '^\[ *[0-9]+/ *[0-9]+\]' |
      awk '{ t = ""; if (match($0, /type = *[A-Za-z0-9_]+/)) { t = substr($0, RSTART, RLENGTH); sub(/type = */, "", t) }
             if (match($0, /converting to [A-Za-z0-9_]+/)) { t = substr($0, RSTART + 14, RLENGTH - 14) }
             n[t]++ } END { for (t in n) printf "%s=%d\n", t, n[t] }' |
      sort | tr '\n' ' ' | sed 's/ *$//')
    # A recipe that comes out as the same mix as an earlier one of this
    # source (the fallbacks of the 64-wide model) adds nothing: drop it.
    if grep -q "^$src-[^	]*	$types\$" "$manifest"; then
      echo "$(basename "$out"): same mix as $(grep "^$src-[^	]*	$types\$" "$manifest" | cut -f1 | head -1), dropped"
      rm -f "$out"
      continue
    fi
    printf '%s\t%s\n' "$(basename "$out")" "$types" >>"$manifest"
    echo "$(basename "$out") $(stat -c %s "$out") bytes: $types"
  done
done
du -sh "$OUTDIR"

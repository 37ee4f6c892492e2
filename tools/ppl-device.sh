#!/usr/bin/env bash
# `qvet ppl --gpu` over every variant on the lent GPU machine, which reaches
# nothing outside: the model arrives as the two parts tools/split-model.sh
# makes (eval/models/<model>.part0 and .part1, under the 64 MiB transfer limit;
# a part may instead wait in $PPL_PARTS, default /tmp/qvet-parts, where an
# earlier call on the same machine put it) and the text as
# eval/data/pride-and-prejudice.txt. Joins the parts, checks
# the model's and the text's SHA-256 (the values in tools/fetch-model.sh and
# tools/fetch-text.sh), runs the fp32 baseline and the variants, and prints a
# compact summary: the chunk progress, the wall time per variant, the table.
#   tools/ppl-device.sh BUILD
# Writes under $OUT (default BUILD/results): ppl-gpu.jsonl (the run line, then
# one "ppl" line per row), ppl-table.txt (the table qvet prints) and
# ppl-progress.log (its progress on stderr).
# Environment:
#   PPL_CHUNKS    chunks of 512 tokens (default 20)
#   PPL_CTX       tokens per chunk (default 512)
#   PPL_VARIANTS  glob over variant names (default: all)
#   PPL_BACKEND   gpu (default), or cpu-fast to try the script on a machine without one
#   PPL_SECONDS   wall-time limit of the qvet run: no chunk starts that would
#                 end past it (default 230, so the whole call stays near 4 minutes)
set -uo pipefail
build=${1:?usage: tools/ppl-device.sh BUILD}
cd "$(dirname "$0")/.."
out=${OUT:-$build/results}
mkdir -p "$out"
model=eval/models/SmolLM2-135M-Instruct.Q4_1.gguf
text=eval/data/pride-and-prejudice.txt
model_sha=$(sed -n 's/^model_sha=//p' tools/fetch-model.sh)
text_sha=$(sed -n 's/^text_sha=//p' tools/fetch-text.sh)
sha_ok() { [ -f "$2" ] && echo "$1  $2" | sha256sum -c --quiet - >/dev/null 2>&1; }
[ -x "$build/qvet" ] || { echo "ppl-device: $build/qvet is missing: build it first (make BUILD=$build)" >&2; exit 2; }
# A part carried by an earlier call may have been set aside in $stash.
stash=${PPL_PARTS:-/tmp/qvet-parts}
if ! sha_ok "$model_sha" "$model"; then
    parts=()
    for p in 0 1; do
        f=$model.part$p
        [ -f "$f" ] || f=$stash/$(basename "$model").part$p
        [ -f "$f" ] || { echo "ppl-device: $model.part$p is missing, here and in $stash (tools/split-model.sh makes it)" >&2; exit 2; }
        parts+=("$f")
    done
    cat "${parts[@]}" > "$model.joining"
    if ! sha_ok "$model_sha" "$model.joining"; then
        rm -f "$model.joining"
        echo "ppl-device: the joined parts do not have the model's SHA-256 $model_sha" >&2
        exit 2
    fi
    mv "$model.joining" "$model"
fi
sha_ok "$text_sha" "$text" || { echo "ppl-device: $text is missing or not SHA-256 $text_sha (tools/fetch-text.sh)" >&2; exit 2; }
nvidia-smi -L 2>/dev/null | head -1
echo "host: $(nproc) cores, OpenBLAS $(readlink -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0 2>/dev/null || echo unknown)"
rm -f "$out/ppl-gpu.jsonl"
start=$(date +%s)
"$build/qvet" ppl --model "$model" --text "$text" --"${PPL_BACKEND:-gpu}" --variant "${PPL_VARIANTS:-all}" \
    --ctx "${PPL_CTX:-512}" --chunks "${PPL_CHUNKS:-20}" --max-seconds "${PPL_SECONDS:-230}" \
    --out "$out/ppl-gpu.jsonl" > "$out/ppl-table.txt" 2> "$out/ppl-progress.log"
rc=$?
echo "qvet ppl exit $rc after $(( $(date +%s) - start )) s"
grep -v '^ppl: time\|^ppl: \[' "$out/ppl-progress.log" | tail -n 8
grep '^ppl: time' "$out/ppl-progress.log" | sed 's/^ppl: time //'
cat "$out/ppl-table.txt"
exit "$rc"

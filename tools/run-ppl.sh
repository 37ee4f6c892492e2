#!/usr/bin/env bash
# make ppl: fetches the model and the text (SHA-256 verified), then runs
# `qvet ppl`: the fp32 baseline and the quantized variants, llama.cpp's protocol
# (chunks of PPL_CTX tokens, second half scored). Results are appended to
# BUILD/results/ppl.jsonl. Never part of `make check`.
#   tools/run-ppl.sh BUILD
# Environment:
#   PPL_BACKEND   gpu | cpu | cpu-fast (default: gpu when a CUDA device answers, else cpu-fast)
#   PPL_VARIANTS  glob over variant names (default: all)
#   PPL_CHUNKS    chunks of the text (default: 20 on the GPU, 4 on the CPU)
#   PPL_CTX       tokens per chunk (default 512)
#   PPL_SECONDS   wall-time limit: no chunk starts that would end past it (default: none)
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
bash tools/fetch-model.sh
bash tools/fetch-text.sh
# The forward pass and tokenizer on the real model against independent fixtures.
for t in "$build"/tests/m_*; do
    [ -x "$t" ] || continue
    "$t" || { echo "run-ppl: $(basename "$t") failed" >&2; exit 1; }
done
backend=${PPL_BACKEND:-}
if [ -z "$backend" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then backend=gpu; else backend=cpu-fast; fi
fi
case "$backend" in
    gpu) chunks=${PPL_CHUNKS:-20} ;;
    cpu|cpu-fast) chunks=${PPL_CHUNKS:-4} ;;
    *) echo "run-ppl: PPL_BACKEND must be gpu, cpu or cpu-fast, not '$backend'" >&2; exit 2 ;;
esac
mkdir -p "$build/results"
exec "$build/qvet" ppl --model eval/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    --text eval/data/pride-and-prejudice.txt --variant "${PPL_VARIANTS:-all}" \
    --ctx "${PPL_CTX:-512}" --chunks "$chunks" --"$backend" ${PPL_SECONDS:+--max-seconds "$PPL_SECONDS"} \
    --out "$build/results/ppl.jsonl"

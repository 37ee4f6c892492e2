#!/usr/bin/env bash
# Splits the evaluation model into two parts small enough for the lent GPU
# machine's transfer limit (64 MiB per call): eval/models/<model>.part0 (the
# first 48 MiB) and .part1 (the rest, about 46 MiB). The parts are git-ignored
# like the model; tools/ppl-device.sh joins them there and checks the SHA-256.
#   tools/split-model.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/fetch-model.sh
model=eval/models/SmolLM2-135M-Instruct.Q4_1.gguf
part_bytes=$((48 * 1024 * 1024)) # 48 MiB: each part leaves room under 64 MiB for what travels with it
head -c "$part_bytes" "$model" > "$model.part0"
tail -c +"$((part_bytes + 1))" "$model" > "$model.part1"
cat "$model.part0" "$model.part1" | cmp -s - "$model" || { echo "split-model: the parts do not join to the model" >&2; exit 1; }
ls -l "$model.part0" "$model.part1"

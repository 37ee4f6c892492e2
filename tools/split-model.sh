#!/usr/bin/env bash
# Splits the evaluation model into two parts small enough for the lent GPU
# machine's transfer limit (64 MiB per call, the working tree included):
# eval/models/<model>.part0 (the first 56 MiB, to travel alone with the tree)
# and .part1 (the rest, about 38 MiB, to travel with BUILD/qvet and the text).
# The parts are git-ignored like the model; tools/ppl-device.sh joins them
# there and checks the SHA-256.
#   tools/split-model.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/fetch-model.sh
model=eval/models/SmolLM2-135M-Instruct.Q4_1.gguf
part_bytes=$((56 * 1024 * 1024)) # 56 MiB: with the ~5 MB working tree, under the 64 MiB a call carries
head -c "$part_bytes" "$model" > "$model.part0"
tail -c +"$((part_bytes + 1))" "$model" > "$model.part1"
cat "$model.part0" "$model.part1" | cmp -s - "$model" || { echo "split-model: the parts do not join to the model" >&2; exit 1; }
ls -l "$model.part0" "$model.part1"

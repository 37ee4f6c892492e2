#!/usr/bin/env bash
# verify-speed.sh: times `qvet verify` on a generated 16 x 4096 x 4096 W4A16 g128
# case (DESIGN.md §9: certifying it takes under 1 s on 2 cores). The inputs are
# random .npy files written by NumPy; the output to verify is NumPy's float32
# GEMM of the fp16-dequantized weights, rounded to fp16, which the declared
# arithmetic accepts. Usage: tools/verify-speed.sh [BUILD]  (default: build)
set -eu
build=${1:-build}
qvet="$build/qvet"
[ -x "$qvet" ] || { echo "verify-speed: $qvet not found; run make BUILD=$build first" >&2; exit 2; }
python3 -c 'import numpy' 2>/dev/null || { echo "verify-speed: needs python3 with numpy" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
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
np.save(f"{d}/A.npy", a)
np.save(f"{d}/Q.npy", q)
np.save(f"{d}/S.npy", s)
np.save(f"{d}/C.npy", c)
PY
start=$(date +%s.%N)
rc=0
"$qvet" verify marlin-w4a16-g128-f16 --a "$dir/A.npy" --q "$dir/Q.npy" --scales "$dir/S.npy" \
    --out "$dir/C.npy" >"$dir/report.txt" || rc=$?
end=$(date +%s.%N)
head -n 1 "$dir/report.txt"
awk -v s="$start" -v e="$end" 'BEGIN { printf "qvet verify 16x4096x4096 marlin-w4a16-g128-f16: %.3f s (loading included)\n", e - s }'
exit $rc

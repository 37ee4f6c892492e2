#!/usr/bin/env bash
# run-main.sh BUILD: the main job (`make run`). Runs the fixed suite
# (`qvet check`: the GPU kernels when a CUDA device is present, the CPU models
# otherwise), then a bounded fuzz campaign on the same backend (2 minutes on a
# GPU, 2000 cases on the CPU models), writing JSON Lines into BUILD/results/
# and shrunk failures into BUILD/results/failures/, then renders the report
# into reports/out/. Exits non-zero when any case FAILs (1) or a step could not
# run (its own exit code), after running every step.
set -u
build=${1:-build}
qvet="$build/qvet"
results="$build/results"
seed=${SEED:-$(date -u +%Y%m%d)}
[ -x "$qvet" ] || { echo "run-main: $qvet is not built (run make)" >&2; exit 2; }
mkdir -p "$results"
status=0

# Keeps the worst exit code: an error (2, 3) outranks a FAIL (1).
note() {
    local rc=$1 what=$2
    if [ "$rc" -eq 1 ]; then
        echo "run-main: $what: FAIL verdicts (see above)"
    elif [ "$rc" -ne 0 ]; then
        echo "run-main: $what exited $rc"
    fi
    [ "$rc" -gt "$status" ] && status=$rc
    return 0
}

echo "== qvet check"
"$qvet" check --out "$results/check.jsonl" --fail-dir "$results/failures"
note $? "qvet check"

# The backend check chose is recorded in its provenance line.
if grep -q '"backend":"gpu"' "$results/check.jsonl" 2>/dev/null; then
    budget=(--minutes 2)
else
    budget=(--cases 2000)
fi
echo "== qvet fuzz ${budget[*]} --seed $seed"
"$qvet" fuzz "${budget[@]}" --seed "$seed" --out "$results/fuzz.jsonl" --fail-dir "$results/failures"
note $? "qvet fuzz"

echo "== qvet report"
"$qvet" report "$results"/*.jsonl -o reports/out
note $? "qvet report"

if [ "$status" -eq 0 ]; then
    echo "run-main: every case PASSed or was MARGINAL; results in $results"
fi
exit "$status"

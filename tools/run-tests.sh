#!/usr/bin/env bash
# Runs every Check suite in BUILD/tests and tallies Check's summary lines.
# A binary that crashes, or exits without Check's "Checks: N" summary, counts as
# a failure: a crash never reads as a pass. Ends with "N passed, N failed".
set -u
build=${1:-build}
pass=0; fail=0; bad=()
for t in "$build"/tests/t_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    log="$build/tests/$name.log"
    start=$(date +%s)
    "$t" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    summary=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$log" | tail -n 1)
    grep -E '^SKIP:' "$log" | sort -u | sed "s/^/  $name: /"
    if [ -z "$summary" ]; then
        echo "FAIL $name: exited $rc without a Check summary (${secs}s)"; tail -n 20 "$log"
        fail=$((fail + 1)); bad+=("$name"); continue
    fi
    n=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$summary")
    f=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$summary")
    e=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$summary")
    pass=$((pass + n - f - e)); fail=$((fail + f + e))
    if [ "$rc" -ne 0 ] || [ $((f + e)) -ne 0 ]; then
        echo "FAIL $name: $summary (${secs}s)"; grep -E ':[EF]:' "$log" | head -n 20
        bad+=("$name")
        [ $((f + e)) -eq 0 ] && fail=$((fail + 1))
    else
        echo "ok   $name: $n checks (${secs}s)"
    fi
done
[ ${#bad[@]} -eq 0 ] || echo "failing suites: ${bad[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

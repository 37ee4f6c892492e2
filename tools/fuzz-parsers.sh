#!/usr/bin/env bash
# Runs every libFuzzer target BUILD/fz/lf_* for SECONDS each (default 60).
#   tools/fuzz-parsers.sh BUILD [SECONDS]        (make fuzz-parsers FUZZ_SECONDS=N)
# Each target lf_NAME starts from the seeds in fuzz/corpus/lf_NAME/ (read
# only; new inputs go to BUILD/fz/corpus/lf_NAME/) and uses
# fuzz/dict/lf_NAME.dict when it exists. A crash, leak, timeout or sanitizer
# report makes the target fail; its reproducer is written as
# BUILD/fz/artifacts/lf_NAME-crash-* and its log kept in BUILD/fz/lf_NAME.log.
# Prints one summary line per target with the number of executions, and
# exits non-zero if any target failed or none was found.
set -u
build=${1:?usage: tools/fuzz-parsers.sh BUILD [SECONDS]}
secs=${2:-60}
case "$secs" in ''|*[!0-9]*) echo "fuzz-parsers: SECONDS must be a whole number, not '$secs'" >&2; exit 2 ;; esac

shopt -s nullglob
targets=()
for t in "$build"/fz/lf_*; do
    [ -f "$t" ] && [ -x "$t" ] && targets+=("$t")
done
if [ ${#targets[@]} -eq 0 ]; then
    echo "fuzz-parsers: no libFuzzer target in $build/fz (build them with make fuzz-parsers)" >&2
    exit 1
fi

failed=()
for t in "${targets[@]}"; do
    name=$(basename "$t")
    seeds="fuzz/corpus/$name"
    work="$build/fz/corpus/$name"
    arts="$build/fz/artifacts"
    log="$build/fz/$name.log"
    mkdir -p "$work" "$arts"
    args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$arts/$name-")
    [ -f "fuzz/dict/$name.dict" ] && args+=(-dict="fuzz/dict/$name.dict")
    dirs=("$work")
    if [ -d "$seeds" ]; then dirs+=("$seeds"); else echo "fuzz-parsers: $name has no seed corpus ($seeds)"; fi
    # ASan reports leaks too; UBSan findings are fatal through the build flags.
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} "$t" "${args[@]}" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    runs=$(grep -Eo 'Done [0-9]+ runs' "$log" | tail -n 1 | grep -Eo '[0-9]+')
    [ -n "$runs" ] || runs=$(grep -E '^stat::number_of_executed_units:' "$log" | tail -n 1 | grep -Eo '[0-9]+$')
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+')
    corpus=$(find "$work" -type f | wc -l)
    if [ "$rc" -eq 0 ] && grep -q 'Done [0-9]* runs' "$log"; then
        echo "ok   $name: ${runs:-?} executions in ${secs}s, coverage ${cov:-?}, $corpus new corpus inputs"
    else
        echo "FAIL $name: exit $rc after ${runs:-?} executions (log: $log)"
        grep -E 'ERROR: |SUMMARY: |runtime error|internal error|artifact_prefix|Test unit written' "$log" | head -n 15
        failed+=("$name")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz-parsers: failing targets: ${failed[*]}"
    exit 1
fi
echo "fuzz-parsers: ${#targets[@]} targets clean"

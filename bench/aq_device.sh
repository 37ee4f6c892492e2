#!/bin/bash
# aq_device.sh: the activation-quantized family's one call on the lent GPU
# machine (see shared/device/README.md): the GPU Check suite, compute-sanitizer
# memcheck and racecheck on one case per tile configuration of every kernel,
# then the benchmark (when built), table last. Run from the repository root
# with the build folder carried: bash bench/aq_device.sh build-aq [suite|sanitize|bench ...]
# BIN overrides the suite binary (default $B/tests/t_gpu_aq), e.g. to compare
# an earlier build; TAG names its logs.
set -u
B=${1:-build-aq}
shift
BIN=${BIN:-$B/tests/t_gpu_aq}
TAG=${TAG:-}
steps=${*:-suite sanitize bench}
export QVET_GOLDEN=$B/golden
out=${OUT:-/tmp}
cs=/usr/local/cuda/bin/compute-sanitizer
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for s in $steps; do
    case $s in
    suite)
        echo "== GPU suite"
        /usr/bin/time -f "suite: %e s" $BIN >$out/suite$TAG.log 2>&1
        echo "suite rc=$?"
        grep -E "^[0-9]+%|cases|golden|witness|FAIL|SKIP|Checks|error" $out/suite$TAG.log | head -60
        ;;
    sanitize)
        echo "== compute-sanitizer (QVET_AQ_QUICK=1)"
        for tool in memcheck racecheck; do
            QVET_AQ_QUICK=1 timeout 240 $cs --tool $tool --print-limit 20 $BIN >$out/san_$tool$TAG.log 2>&1
            echo "$tool rc=$?"
            grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks|Invalid|hazard" $out/san_$tool$TAG.log | head -8
        done
        ;;
    bench)
        if [ -x "$BIN" ]; then
            echo "== bench"
            QVET_AQ_BENCH=1 $BIN >$out/bench$TAG.log 2>&1
            echo "bench rc=$?"
            cat $out/bench$TAG.log | tail -80
        fi
        ;;
    esac
done

#!/bin/bash
# aq_device.sh: the activation-quantized family's one call on the lent GPU
# machine (see shared/device/README.md): the GPU Check suite, compute-sanitizer
# memcheck and racecheck on one case per tile configuration of every kernel,
# then the benchmark (when built), table last. Run from the repository root
# with the build folder carried: bash bench/aq_device.sh build-aq [suite|sanitize|bench ...]
set -u
B=${1:-build-aq}
shift
steps=${*:-suite sanitize bench}
export QVET_GOLDEN=$B/golden
out=${OUT:-/tmp}
cs=/usr/local/cuda/bin/compute-sanitizer
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for s in $steps; do
    case $s in
    suite)
        echo "== GPU suite"
        /usr/bin/time -f "suite: %e s" $B/tests/t_gpu_aq >$out/suite.log 2>&1
        echo "suite rc=$?"
        grep -E "^[0-9]+%|cases|golden|witness|FAIL|SKIP|Checks|error" $out/suite.log | head -60
        ;;
    sanitize)
        echo "== compute-sanitizer (QVET_AQ_QUICK=1)"
        for tool in memcheck racecheck; do
            QVET_AQ_QUICK=1 timeout 240 $cs --tool $tool --print-limit 20 $B/tests/t_gpu_aq >$out/san_$tool.log 2>&1
            echo "$tool rc=$?"
            grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks|Invalid|hazard" $out/san_$tool.log | head -8
        done
        ;;
    bench)
        if [ -x $B/tests/t_gpu_aq ]; then
            echo "== bench"
            QVET_AQ_BENCH=1 $B/tests/t_gpu_aq >$out/bench.log 2>&1
            echo "bench rc=$?"
            cat $out/bench.log | tail -80
        fi
        ;;
    esac
done

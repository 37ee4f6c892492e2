#!/bin/bash
# aq_device.sh: the activation-quantized family's one call on the lent GPU
# machine (see shared/device/README.md): the GPU Check suite, compute-sanitizer
# memcheck and racecheck on one case per tile configuration of every kernel,
# then `qvet bench` on the family's rows with their baselines, table last. Run
# from the repository root with the build folder carried:
#   bash bench/aq_device.sh build-aq [suite|sanitize|bench ...]
# BIN overrides the suite binaries (default $B/tests/t_gpu_aq and
# $B/tests/t_gpu_aq_wg, the QQQ wgmma kernel's) and QVET the qvet
# binary (default $B/qvet), e.g. to compare an earlier build; TAG names the
# logs; RUNS (default 50), MS (M list) and MODEL narrow the benchmark.
set -u
B=${1:-build-aq}
shift
BIN=${BIN:-$B/tests/t_gpu_aq $B/tests/t_gpu_aq_wg}
QVET=${QVET:-$B/qvet}
TAG=${TAG:-}
steps=${*:-suite sanitize bench}
export QVET_GOLDEN=$B/golden
out=${OUT:-/tmp}
cs=/usr/local/cuda/bin/compute-sanitizer
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for s in $steps; do
    case $s in
    suite)
        for bin in $BIN; do
            name=$(basename $bin)
            echo "== GPU suite $name"
            /usr/bin/time -f "suite: %e s" $bin >$out/suite$TAG-$name.log 2>&1
            echo "suite rc=$?"
            grep -E "^[0-9]+%|cases|golden|witness|FAIL|SKIP|Checks|error" $out/suite$TAG-$name.log | head -60
        done
        ;;
    sanitize)
        echo "== compute-sanitizer (QVET_AQ_QUICK=1)"
        for bin in $BIN; do
            name=$(basename $bin)
            for tool in memcheck racecheck; do
                QVET_AQ_QUICK=1 timeout 240 $cs --tool $tool --print-limit 20 $bin >$out/san_$tool$TAG-$name.log 2>&1
                echo "$name $tool rc=$?"
                grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks|Invalid|hazard" $out/san_$tool$TAG-$name.log | head -8
            done
        done
        ;;
    bench)
        echo "== bench"
        $QVET bench --variant 'qqq-*,w8a8-*' --runs ${RUNS:-50} ${MS:+--m $MS} ${MODEL:+--model $MODEL} \
            --out $out/bench$TAG.jsonl >$out/bench$TAG.log 2>&1
        echo "bench rc=$?"
        grep -v "^timed " $out/bench$TAG.log | tail -100
        ;;
    esac
done

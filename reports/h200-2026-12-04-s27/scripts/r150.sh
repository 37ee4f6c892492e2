#!/bin/bash
# r150: compute-sanitizer on r149's qn (the committed kernels, default stages before the wait: 1 for 4-bit,
# 2 for 8-bit codes): racecheck on the split-K cluster cases of an 8-bit row (last-warp refill) and on the
# chain suite (8-bit), memcheck on the split-K cluster cases of a grouped 4-bit row.
set -u
cd .dev
xz -dc qb.xz > qb; ./zstd -q -d -f --long=27 --patch-from=qb qn.zst -o qn; chmod +x qn
mkdir -p tests
for t in t_gpu_wonly t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qn tn/$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r150; rm -rf $O; mkdir -p $O
run() { local name=$1; shift; ( s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt ) }
QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-fp8a16-ch-bf16 run racecheck-cluster-fp8-ch-bf16 timeout 280 compute-sanitizer --tool racecheck tests/t_gpu_wonly &
QVET_WONLY_ROWS=marlin-w8a16-ch-f16 run racecheck-chain-w8-ch-f16 timeout 280 compute-sanitizer --tool racecheck tests/t_gpu_wonly_chain &
QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w4a16-g128-f16 run memcheck-cluster-g128-f16 timeout 280 compute-sanitizer --tool memcheck tests/t_gpu_wonly &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r150.tgz r150

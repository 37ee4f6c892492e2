#!/bin/bash
# r122: qq = HEAD's kernels launched as programmatic dependents without the L2 prefetches (qp's
# cause of slower per-layer times). t_gpu_wonly_chain (A0 scaled until finite) in full, its no-wait
# build on two rows, racecheck on one row; then qh / qp / qq in turns, 2 turns.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qh qp qq; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
for t in t_gpu_wonly_chain tcnw; do ./zstd -q -d -f --long=27 --patch-from=qq q-$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r122; rm -rf $O; mkdir -p $O
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
run chain timeout 200 tests/t_gpu_wonly_chain
for r in w4a16-ch-f16 fp8a16-ch-f16; do QVET_WONLY_ROWS=marlin-$r run nowait-$r timeout 60 tests/tcnw; done
QVET_WONLY_ROWS=marlin-w4a16-g128-f16 run racecheck timeout 200 compute-sanitizer --tool racecheck tests/t_gpu_wonly_chain &
V='marlin-fp8a16-ch-f16,marlin-w4a16-ch-f16,marlin-w4a16-g128-f16'
wait
for t in 1 2; do for b in qh qp qq; do
  timeout 80 ./$b bench --m 1,4,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks|RACECHECK SUMMARY' $f | tail -2 | tr '\n' ' ') $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r122.tgz r122

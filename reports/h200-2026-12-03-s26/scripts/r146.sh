#!/bin/bash
# r146: where the small-M kernel's time goes at M = 1 and 4 after the two-chunk rule: qf (committed) /
# qnm (the same with -DQV_WO_SMALL_NO_MATH=1: the ring and split-K without the math) in turns, and the
# committed kernels' time lines (qtl: -DQV_WO_SMALL_TIMELINE, QVET_WO_SMALL_TRACE=2), Llama-3-70B.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qf qnm qtl; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
export QVET_GOLDEN=$PWD/golden
O=/tmp/r146; rm -rf $O; mkdir -p $O
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16'
for t in 1 2; do for b in qf qnm; do
  timeout 60 ./$b bench --model llama3-70b --m 1,4 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-llama3-70b-$t.jsonl > /dev/null 2>&1 || echo "$b $t failed"
done; done
QVET_WO_SMALL_TRACE=2 timeout 60 ./qtl bench --model llama3-70b --m 1,4 --runs 5 --passes 1 --no-pair --variant "$V" 2> $O/timeline.txt > /dev/null || echo "timeline failed"
grep -c timeline $O/timeline.txt
tar -C /tmp -czf $OUT/r146.tgz r146

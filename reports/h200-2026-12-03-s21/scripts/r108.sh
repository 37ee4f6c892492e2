#!/bin/bash
# r108: which part of qp's change costs time: q3 (HEAD), qp (tensor-map prefetch + weights before
# griddepcontrol.wait), qa (weights before the wait only), qb (tensor-map prefetch only), in turns,
# --no-pair, act-f16, act-bf16, g128-f16 at M = 64, 256, 1024, three turns.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in q3 qp qa qb; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
O=/tmp/r108; rm -rf $O; mkdir -p $O
V='marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16,marlin-w4a16-g128-f16'
for t in 1 2 3; do for b in q3 qp qa qb; do
  timeout 100 ./$b bench --m 64,256,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
tar -C /tmp -czf $OUT/r108.tgz r108

#!/bin/bash
# r121: qh (HEAD's device code) / qp in turns: three rows, both models, M = 1, 4, 8, 16,
# --no-pair, three turns: the per-layer times and the chained block.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qh
./zstd -q -d -f --long=27 --patch-from=q0 qp.zst -o qp
chmod +x qh qp
export QVET_GOLDEN=$PWD/golden
O=/tmp/r121; rm -rf $O; mkdir -p $O
V='marlin-fp8a16-ch-f16,marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-w4a16-g128-act-f16'
for t in 1 2 3; do for b in qh qp; do
  timeout 90 ./$b bench --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
tar -C /tmp -czf $OUT/r121.tgz r121

#!/bin/bash
# r119: the small-M kernel's ring without its math (qnm: HEAD's wonly_small.cu built with
# -DQV_WO_SMALL_NO_MATH=1, wrong results, measurements only) against HEAD (qh), M = 1-16, three
# rows, both models, --no-pair, two turns; by default and with QVET_WO_WG_MIN_M=17 (the small-M
# kernel on every layer up to M = 16).
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qh
./zstd -q -d -f --long=27 --patch-from=q0 qnm.zst -o qnm
chmod +x qh qnm
export QVET_GOLDEN=$PWD/golden
O=/tmp/r119; rm -rf $O; mkdir -p $O
V='marlin-fp8a16-ch-f16,marlin-w4a16-ch-f16,marlin-w4a16-g128-f16'
for t in 1 2; do for b in qh qnm; do
  timeout 60 ./$b bench --m 1,4,8,12,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/def-$b-$t.jsonl > /dev/null 2>&1 || echo "def $b-$t failed"
  QVET_WO_WG_MIN_M=17 timeout 60 ./$b bench --m 12,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/s17-$b-$t.jsonl > /dev/null 2>&1 || echo "s17 $b-$t failed"
done; done
tar -C /tmp -czf $OUT/r119.tgz r119

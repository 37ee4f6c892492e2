#!/bin/bash
# r112: HEAD (qh): which kernel takes M = 9-16: default (the wgmma kernel in 16-token tiles on
# layers of 2^27 weights or more, the small-M kernel below), QVET_WO_WG_MIN_M=17 (the small-M
# kernel everywhere) and QVET_WO_WG_MIN_M=9 (the wgmma kernel everywhere), paired with cuBLAS
# fp16, M = 12, 16, two turns.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qvet; chmod +x qvet
O=/tmp/r112; rm -rf $O; mkdir -p $O
V='cublas-f16,marlin-*'
for t in 1 2; do
  for c in def s17 w9; do
    case $c in def) E="";; s17) E="QVET_WO_WG_MIN_M=17";; w9) E="QVET_WO_WG_MIN_M=9";; esac
    env $E timeout 120 ./qvet bench --m 12,16 --runs 20 --variant "$V" --out $O/ab-$c-$t.jsonl > $O/ab-$c-$t.txt 2>&1 || echo "$c-$t failed"
  done
done
tar -C /tmp -czf $OUT/r112.tgz r112

#!/bin/bash
# r110: HEAD (qh, 0cf77e3): the complete weight-only table paired with cuBLAS fp16, twice.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qvet; chmod +x qvet
export QVET_GOLDEN=$PWD/golden
O=/tmp/r110; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu,power.limit --format=csv > $O/smi.txt 2>&1
for t in 1 2; do
  ( time timeout 270 ./qvet bench --runs 20 --variant 'cublas-f16,marlin-*' --out $O/wo-$t.jsonl > $O/wo-$t.txt 2>&1 ) 2>> $O/time.txt; echo "wo-$t rc=$?"
done
cat $O/time.txt
tar -C /tmp -czf $OUT/r110.tgz r110

#!/bin/bash
# r114: qs2 = qs with each block's slice bounds from host-computed q = U / S and r = U mod S (32-bit,
# no division in the kernel); ts2 its t_gpu_wonly: the split-K cluster cases of every row
# (QVET_WONLY_QUICK=2), then qh / qs2 in turns, every weight-only row, M = 1, 4, 8, 16, two turns.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qh
./zstd -q -d -f --long=27 --patch-from=q0 qs2.zst -o qs2
./zstd -q -d -f --long=27 --patch-from=qs2 ts2.zst -o t_gpu_wonly
chmod +x qh qs2 t_gpu_wonly
export QVET_GOLDEN=$PWD/golden
O=/tmp/r114; rm -rf $O; mkdir -p $O
( start=$(date +%s); QVET_WONLY_QUICK=2 timeout 90 ./t_gpu_wonly > $O/t_gpu_wonly-quick2.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - start ))" >> $O/t_gpu_wonly-quick2.txt )
grep -E '^100%|Checks|rc=' $O/t_gpu_wonly-quick2.txt | head -3
for t in 1 2; do for b in qh qs2; do
  timeout 60 ./$b bench --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant 'marlin-*' --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
tar -C /tmp -czf $OUT/r114.tgz r114

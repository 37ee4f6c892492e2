#!/bin/bash
# r88: HEAD's binaries (qa of r87 = the commit after it): t_gpu_wonly (full) and t_gpu_wg (full, all
# 22 rows in four processes) side by side.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qa.zst -o qa
for b in t_gpu_wg t_gpu_wonly; do ./zstd -q -d -f --long=27 --patch-from=qa $b.zst -o $b; done
chmod +x q0 qa t_*
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( time timeout 420 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1 &
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 420 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt wg3.txt wg4.txt > $OUT/t_gpu_wg.txt
grep -E 'Checks|real' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt
grep -c ', 0 failed' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt
grep -E 'failed' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt | grep -v ', 0 failed' | head

#!/bin/bash
# r69: the final device code: t_gpu_wonly and t_gpu_wg full (all 22 rows, four
# processes), side by side on the GPU.
set -u
cd .dev
./zstd -q -d -f qold.zst -o q; chmod +x q
./zstd -q -d --long=27 --patch-from=q qn.patch.zst -o qn; chmod +x qn
for b in t_gpu_wg t_gpu_wonly; do ./zstd -q -d --long=27 --patch-from=qn $b.patch.zst -o $b; chmod +x $b; done
( time timeout 400 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1 &
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 400 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt wg3.txt wg4.txt > $OUT/t_gpu_wg.txt
grep -E 'Checks|real' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt

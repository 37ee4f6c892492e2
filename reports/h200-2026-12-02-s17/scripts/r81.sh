#!/bin/bash
# r81: q0 = HEAD (cef8128); qd = the descriptor's low word carried from stage to stage;
# qz = qd with the f16 zero-point rows' one-constant dequantization and the bf16 fp8 group rows'
# bit-moved codes. Correctness of qz (t_gpu_wg full in four processes, t_gpu_wonly, racecheck on
# the two changed instances), then q0 / qd / qz in turns on the rows they change, M = 256 and 1024.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qd qz; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
for b in t_gpu_wg t_gpu_wonly; do ./zstd -q -d -f --long=27 --patch-from=qz $b.zst -o $b; done
chmod +x q0 qd qz t_*
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( time timeout 420 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1 &
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 420 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt wg3.txt wg4.txt > $OUT/t_gpu_wg.txt
for r in marlin-w4a16-g128-zp-f16 marlin-fp8a16-g128-bf16; do
  ( QVET_WG_QUICK=1 QVET_WG_ROWS="$r" timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-$r.txt 2>&1; echo "racecheck $r rc=$?"
done
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-*.txt
grep -E 'Checks|real|FAIL|fail' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt | head -40

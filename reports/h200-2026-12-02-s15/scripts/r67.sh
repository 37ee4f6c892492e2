#!/bin/bash
# r67: one stream-K flag per tail piece in both wgmma kernels; racecheck of
# both suites' quick passes, t_gpu_aq_wg full and t_gpu_wg quick.
set -u
cd .dev
./zstd -q -d -f qold.zst -o q; chmod +x q
./zstd -q -d --long=27 --patch-from=q qn.patch.zst -o qn; chmod +x qn
for b in t_gpu_aq_wg t_gpu_wg; do ./zstd -q -d --long=27 --patch-from=qn $b.patch.zst -o $b; chmod +x $b; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( QVET_AQ_QUICK=1 timeout 300 compute-sanitizer --tool racecheck ./t_gpu_aq_wg ) > $OUT/racecheck-aq-wg.txt 2>&1; echo "racecheck aq_wg rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g128-f16' timeout 300 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-wg.txt 2>&1; echo "racecheck wg rc=$?"
( time timeout 300 ./t_gpu_aq_wg ) > $OUT/t_gpu_aq_wg.txt 2>&1; echo "t_gpu_aq_wg rc=$?"
( time QVET_WG_QUICK=1 timeout 200 ./t_gpu_wg ) > $OUT/t_gpu_wg.txt 2>&1; echo "t_gpu_wg rc=$?"
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-aq-wg.txt $OUT/racecheck-wg.txt
grep -E 'Checks|real' $OUT/t_gpu_aq_wg.txt $OUT/t_gpu_wg.txt

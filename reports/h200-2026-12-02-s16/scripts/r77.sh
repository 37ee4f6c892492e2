#!/bin/bash
# r77: the device code of this round (the stage's descriptor as a 32-bit low word, both wgmma kernels):
# t_gpu_wonly and t_gpu_wg full side by side, then t_gpu_aq_wg, racecheck on both kernels, t_bench_cli.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qn.zst -o qn
for b in t_gpu_wg t_gpu_aq_wg t_gpu_wonly t_bench_cli; do ./zstd -q -d -f --long=27 --patch-from=qn $b.zst -o $b; done
chmod +x q0 qn t_*
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( time timeout 420 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1 &
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 420 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt wg3.txt wg4.txt > $OUT/t_gpu_wg.txt
( time timeout 200 ./t_gpu_aq_wg ) > $OUT/t_gpu_aq_wg.txt 2>&1; echo "t_gpu_aq_wg rc=$?"
( QVET_AQ_QUICK=1 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_aq_wg ) > $OUT/racecheck-aq-wg.txt 2>&1; echo "racecheck aq_wg rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g128-zp-f16' timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-wg.txt 2>&1; echo "racecheck wg rc=$?"
QVET_BIN=$PWD/qn timeout 100 ./t_bench_cli > $OUT/t_bench_cli.txt 2>&1; echo "t_bench_cli rc=$?"
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-aq-wg.txt $OUT/racecheck-wg.txt
grep -E 'Checks|real' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt $OUT/t_gpu_aq_wg.txt $OUT/t_bench_cli.txt

#!/bin/bash
# r106: t5 = t_gpu_wg of this round's committed kernels (e18d088's device code) with
# act_order_permutation checking the workspace's counters area after every launch: the act rows.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 t5.zst -o t_gpu_wg
chmod +x t_gpu_wg
export QVET_GOLDEN=$PWD/golden
( time QVET_WG_ROWS='marlin-w4a16-g128-act-*' timeout 300 ./t_gpu_wg ) > $OUT/t_gpu_wg-act.txt 2>&1; echo "rc=$?"
cat $OUT/t_gpu_wg-act.txt

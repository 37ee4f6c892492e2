#!/bin/bash
# r103: q3 (this round's HEAD device code): qvet bench on the act_order rows, paired with cuBLAS,
# every M of both models (r95's command on the two rows that changed).
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 q3.zst -o q3
chmod +x q3
timeout 500 ./q3 bench --runs 20 --variant 'cublas-f16,marlin-w4a16-g128-act-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1; echo "bench rc=$?"
grep -E 'block \(|act-|^cublas' $OUT/wo.txt | head -20

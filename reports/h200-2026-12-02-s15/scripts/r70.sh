#!/bin/bash
# r70: the weight-only table at HEAD's device code (3139088 + aq_bench).
set -u
cd .dev
./zstd -q -d -f qold.zst -o q; chmod +x q
./zstd -q -d --long=27 --patch-from=q qn.patch.zst -o qn; chmod +x qn
./qn bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1; echo "bench rc=$?"
tail -n 4 $OUT/wo.txt

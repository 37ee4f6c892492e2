#!/bin/bash
# r113: qs = HEAD + the small-M kernel's K slices balanced over whole groups (slices differ by at
# most one group or tile; every slice count from 1 to the unit count possible) and the plan's
# candidates per slice length; ts = its t_gpu_wonly. racecheck on the split-K cluster cases of two
# grouped rows and memcheck on one; t_gpu_wonly full; qh (HEAD) / qs in turns, every weight-only
# row, M = 1, 4, 8, 12, 16, --no-pair, three turns.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qh
./zstd -q -d -f --long=27 --patch-from=q0 qs.zst -o qs
./zstd -q -d -f --long=27 --patch-from=qs ts.zst -o t_gpu_wonly
chmod +x qh qs t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r113; rm -rf $O; mkdir -p $O
( start=$(date +%s); timeout 400 ./t_gpu_wonly > $O/t_gpu_wonly.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - start ))" >> $O/t_gpu_wonly.txt ) &
for r in marlin-w4a16-g128-zp-f16 marlin-fp8a16-g128-bf16; do
  ( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS="$r" timeout 200 compute-sanitizer --tool racecheck ./t_gpu_wonly ) > $O/racecheck-$r.txt 2>&1; echo "racecheck $r rc=$?"
done
( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w8a16-g128-f16 timeout 200 compute-sanitizer --tool memcheck ./t_gpu_wonly ) > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"
wait
grep -E 'SUMMARY|Checks' $O/racecheck-*.txt $O/memcheck.txt
grep -E '^100%|Checks|rc=' $O/t_gpu_wonly.txt | head -3
for t in 1 2 3; do for b in qh qs; do
  timeout 100 ./$b bench --m 1,4,8,12,16 --runs 20 --passes 1 --no-pair --variant 'marlin-*' --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
tar -C /tmp -czf $OUT/r113.tgz r113

#!/bin/bash
# r116: qa = HEAD + A's rows streamed with the small-M kernel's weight ring where a longer slice pays
# (ta its t_gpu_wonly). t_gpu_wonly full (four processes by row family) with racecheck on the
# split-K cluster cases of three rows and memcheck on one, then qh (HEAD) / qa in turns, every
# weight-only row, M = 1, 2, 4, 8, 12, 16, --no-pair, three turns.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qh
./zstd -q -d -f --long=27 --patch-from=q0 qa.zst -o qa
./zstd -q -d -f --long=27 --patch-from=qa ta.zst -o t_gpu_wonly
chmod +x qh qa t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r116; rm -rf $O; mkdir -p $O
for pat in w4a16-g w4a16-ch w8a16 fp8a16; do
  ( start=$(date +%s); QVET_WONLY_ROWS=$pat timeout 300 ./t_gpu_wonly > $O/t_gpu_wonly-$pat.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - start ))" >> $O/t_gpu_wonly-$pat.txt ) &
done
for r in marlin-w4a16-g128-zp-f16 marlin-fp8a16-ch-bf16 marlin-w4a16-ch-f16; do
  ( ( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS="$r" timeout 300 compute-sanitizer --tool racecheck ./t_gpu_wonly ) > $O/racecheck-$r.txt 2>&1; echo "racecheck $r rc=$?" ) &
done
( ( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w8a16-g128-bf16 timeout 300 compute-sanitizer --tool memcheck ./t_gpu_wonly ) > $O/memcheck.txt 2>&1; echo "memcheck rc=$?" ) &
wait
grep -E 'SUMMARY|Checks' $O/racecheck-*.txt $O/memcheck.txt
grep -hE '^[0-9]+%|Checks|rc=' $O/t_gpu_wonly-*.txt
QVET_WO_SMALL_TRACE=1 ./qa bench --m 1,4,8,12,16 --runs 2 --passes 1 --no-pair --variant 'marlin-w4a16-ch-f16,marlin-w4a16-g128-f16' > /dev/null 2> $O/plans-qa.txt
for t in 1 2 3; do for b in qh qa; do
  timeout 150 ./$b bench --m 1,2,4,8,12,16 --runs 20 --passes 1 --no-pair --variant 'marlin-*' --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
tar -C /tmp -czf $OUT/r116.tgz r116

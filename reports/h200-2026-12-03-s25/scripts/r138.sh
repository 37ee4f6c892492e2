#!/bin/bash
# r138: qb = HEAD + the one-fma form for bf16 too (WT_INT4_GF with bf16: the nibble as q 2^-130,
# S = s 2^130, |s| <= 0x3E7F): qn / qb in turns on the g128 bf16 rows and the f16 one (3 turns),
# qb's t_gpu_wonly on the w4a16-g rows (scale-edge cases included), racecheck on the
# scale-edge cases of w4a16-g128-bf16.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qn qb; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
./zstd -q -d -f --long=27 --patch-from=qb b-t_gpu_wonly.zst -o tests/b-t_gpu_wonly; chmod +x tests/b-t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r138; rm -rf $O; mkdir -p $O
V='marlin-w4a16-g128-bf16,marlin-w4a16-g128-act-bf16,marlin-w4a16-g128-f16'
for t in 1 2 3; do for b in qn qb; do
  for mdl in llama3-70b llama2-7b; do
    timeout 80 ./$b bench --model $mdl --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done
done; done
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
QVET_WONLY_ROWS=w4a16-g run t_gpu_wonly-w4a16-g timeout 300 tests/b-t_gpu_wonly &
QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-bf16 run racecheck-g128-bf16 timeout 300 compute-sanitizer --tool racecheck tests/b-t_gpu_wonly &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(grep -E 'RACECHECK SUMMARY' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "FAIL" $O/*.txt | head -5 | cut -c1-250
tar -C /tmp -czf $OUT/r138.tgz r138

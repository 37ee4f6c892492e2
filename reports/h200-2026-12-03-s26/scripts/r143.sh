#!/bin/bash
# r143: qe = qd + the one-fma form with two chunks per warp (WT_INT4_GF, cpw 2) + the rule without the
# long-slice clause for 8-bit fp16 rows without group scales. (1) qn / qd / qe in turns, every marlin row,
# M = 1..8, both models, 3 turns; (2) qe's full table; (3) qe's t_gpu_wonly by family, t_gpu_wonly_chain;
# racecheck / memcheck on the scale-edge cases (now also with two chunks); the unchecked-fma mutant's scale-edge cases.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qn qd qe; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
for t in t_gpu_wonly t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qe e-$t.zst -o tests/e-$t; chmod +x tests/e-$t; done
./zstd -q -d -f --long=27 --patch-from=tests/e-t_gpu_wonly me-t_gpu_wonly.zst -o tests/me-t_gpu_wonly; chmod +x tests/me-t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r143; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $O/smi.txt
T0=$(date +%s)
for t in 1 2 3; do
  for b in qn qd qe; do for mdl in llama3-70b llama2-7b; do
    timeout 120 ./$b bench --model $mdl --m 1,2,3,4,5,6,7,8 --runs 20 --passes 1 --no-pair --variant 'marlin-*' --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done; done
done
echo "ab secs=$(( $(date +%s) - T0 ))"
T1=$(date +%s)
timeout 200 ./qe bench --runs 20 --variant 'cublas-f16,marlin-*' --out $O/wo-1.jsonl > $O/wo-1.txt 2>&1 || echo "table failed"
echo "table secs=$(( $(date +%s) - T1 ))"
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for f in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$f run t_gpu_wonly-$f timeout 300 tests/e-t_gpu_wonly & done
run t_gpu_wonly_chain timeout 300 tests/e-t_gpu_wonly_chain &
QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-f16 run mutant-g4-fma-unchecked timeout 300 tests/me-t_gpu_wonly &
wait
QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-f16 run racecheck-edges-g128-f16 timeout 400 compute-sanitizer --tool racecheck tests/e-t_gpu_wonly &
QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-act-f16 run memcheck-edges-act-f16 timeout 400 compute-sanitizer --tool memcheck tests/e-t_gpu_wonly &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "scale-edge cases" $O/*.txt | head -8
tar -C /tmp -czf $OUT/r143.tgz r143

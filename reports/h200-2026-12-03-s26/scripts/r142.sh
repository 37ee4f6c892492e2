#!/bin/bash
# r142: qd = HEAD + two chunks per warp for 8-bit codes + the default's two_chunks_pay rule (every row but zero points).
# (1) qn / qd in turns, every marlin row, M = 1..8, both models, 3 turns; (2) qd's full table against cuBLAS;
# (3) qd's t_gpu_wonly by family, t_gpu_wonly_chain; racecheck (w8a16-ch-f16) / memcheck (fp8a16-g128-bf16) on the split-K cluster cases.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qn qd; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
for t in t_gpu_wonly t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qd d-$t.zst -o tests/d-$t; chmod +x tests/d-$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r142; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $O/smi.txt
T0=$(date +%s)
for t in 1 2 3; do
  for b in qn qd; do for mdl in llama3-70b llama2-7b; do
    timeout 120 ./$b bench --model $mdl --m 1,2,3,4,5,6,7,8 --runs 20 --passes 1 --no-pair --variant 'marlin-*' --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done; done
done
echo "ab secs=$(( $(date +%s) - T0 ))"
T1=$(date +%s)
timeout 200 ./qd bench --runs 20 --variant 'cublas-f16,marlin-*' --out $O/wo-1.jsonl > $O/wo-1.txt 2>&1 || echo "table failed"
echo "table secs=$(( $(date +%s) - T1 ))"
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for f in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$f run t_gpu_wonly-$f timeout 300 tests/d-t_gpu_wonly & done
run t_gpu_wonly_chain timeout 300 tests/d-t_gpu_wonly_chain &
wait
QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w8a16-ch-f16 run racecheck-w8-ch-f16 timeout 300 compute-sanitizer --tool racecheck tests/d-t_gpu_wonly &
QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-fp8a16-g128-bf16 run memcheck-fp8-g128-bf16 timeout 300 compute-sanitizer --tool memcheck tests/d-t_gpu_wonly &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "FAIL\|failed" $O/t_*.txt $O/*check*.txt | head -8 | cut -c1-250
tar -C /tmp -czf $OUT/r142.tgz r142

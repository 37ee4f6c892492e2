#!/bin/bash
# r141: qc = HEAD + two chunks per warp for 8-bit codes (swap2) + the default's two_chunks_pay rule (4-bit, no zp).
# (1) qn / qc in turns, 4-bit rows, M = 1..8, both models, 3 turns; (2) qc default / qc swap2 on 8-bit rows, M = 1, 4, 8;
# (3) qc's t_gpu_wonly by family; racecheck + memcheck on the split-K cluster cases of fp8a16-ch-bf16 / w8a16-g128-f16.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qn qc; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
./zstd -q -d -f --long=27 --patch-from=qc c-t_gpu_wonly.zst -o tests/c-t_gpu_wonly; chmod +x tests/c-t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r141; rm -rf $O; mkdir -p $O
T0=$(date +%s)
V4='marlin-w4a16-ch-f16,marlin-w4a16-ch-bf16,marlin-w4a16-g128-f16,marlin-w4a16-g128-bf16,marlin-w4a16-g64-f16,marlin-w4a16-g32-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-g128-zp-f16'
V8='marlin-fp8a16-ch-f16,marlin-fp8a16-ch-bf16,marlin-fp8a16-g128-f16,marlin-fp8a16-tensor-f16,marlin-w8a16-ch-f16,marlin-w8a16-g128-f16'
for t in 1 2 3; do
  for b in qn qc; do for mdl in llama3-70b llama2-7b; do
    timeout 80 ./$b bench --model $mdl --m 1,2,3,4,5,6,7,8 --runs 20 --passes 1 --no-pair --variant "$V4" --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done; done
  for b in def swap2; do for mdl in llama3-70b llama2-7b; do
    if [ $b = swap2 ]; then export QVET_WO_SMALL=swap2; else unset QVET_WO_SMALL; fi
    timeout 80 ./qc bench --model $mdl --m 1,4,8 --runs 20 --passes 1 --no-pair --variant "$V8" --out $O/e8-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "8 $b-$mdl-$t failed"
  done; done
  unset QVET_WO_SMALL
done
echo "bench secs=$(( $(date +%s) - T0 ))"
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for f in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$f run t_gpu_wonly-$f timeout 300 tests/c-t_gpu_wonly & done
wait
QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-fp8a16-ch-bf16 run racecheck-fp8-ch-bf16 timeout 300 compute-sanitizer --tool racecheck tests/c-t_gpu_wonly &
QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w8a16-g128-f16 run memcheck-w8-g128-f16 timeout 300 compute-sanitizer --tool memcheck tests/c-t_gpu_wonly &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "FAIL\|failed" $O/*.txt | head -8 | cut -c1-250
tar -C /tmp -czf $OUT/r141.tgz r141

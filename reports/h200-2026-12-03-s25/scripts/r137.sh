#!/bin/bash
# r137: qn = the committed form: the one-fma dequantization in its own kernel (WT_INT4_GF), which the host
# launches for g >= 128 in fp16 on the swapped path; the other small-M kernels keep their machine code.
# qq / qn in turns (3 turns), qn's suites, racecheck + memcheck on the scale-edge cases, the mutant qm.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qq qn; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
./zstd -q -d -f --long=27 --patch-from=q0 qm.zst -o qm; chmod +x qm
./zstd -q -d -f --long=27 --patch-from=qm m-t_gpu_wonly.zst -o tests/m-t_gpu_wonly; chmod +x tests/m-t_gpu_wonly
for t in t_gpu_wonly t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qn n-$t.zst -o tests/n-$t; chmod +x tests/n-$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r137; rm -rf $O; mkdir -p $O
V='marlin-w4a16-g128-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-g64-f16,marlin-w4a16-ch-f16,marlin-w4a16-g128-bf16'
T0=$(date +%s)
for t in 1 2 3; do for b in qq qn; do
  for mdl in llama3-70b llama2-7b; do
    timeout 80 ./$b bench --model $mdl --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done
done; done
echo "bench secs=$(( $(date +%s) - T0 ))" > $O/time.txt
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for pat in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$pat run t_gpu_wonly-$pat timeout 400 tests/n-t_gpu_wonly & done
( run t_gpu_wonly_chain timeout 300 tests/n-t_gpu_wonly_chain
  QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-f16 run racecheck-g128-f16 timeout 400 compute-sanitizer --tool racecheck tests/n-t_gpu_wonly
  QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-act-f16 run memcheck-g128-act-f16 timeout 400 compute-sanitizer --tool memcheck tests/n-t_gpu_wonly ) &
wait
# the mutant gpu_wo_small_g4_fma_unchecked (qm) against qn: qvet check down the swapped small-M path, and the scale-edge cases
for b in qn qm; do QVET_WO_SMALL=swap run check-$b timeout 200 ./$b check --variant marlin-w4a16-g128-f16 --gpu --no-shrink --out $O/check-$b.jsonl; done
QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-f16 run mutant-scale-edges timeout 200 tests/m-t_gpu_wonly
echo "all secs=$(( $(date +%s) - T0 ))" >> $O/time.txt
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "FAIL" $O/t_gpu_wonly-*.txt | head -10
for b in qn qm; do echo "check-$b: $(grep -c '"verdict":"FAIL"' $O/check-$b.jsonl) FAIL of $(grep -c '"verdict"' $O/check-$b.jsonl)"; done
tar -C /tmp -czf $OUT/r137.tgz r137

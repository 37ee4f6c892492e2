#!/bin/bash
# r148: qn = HEAD's small-M kernel with every scale and its first QVET_WO_SMALL_PRE ring stages requested
# before griddepcontrol.wait (the scales first), the dependents' trigger after the wait; the wgmma kernel
# as HEAD's (r147's change to it reverted). qb = HEAD (035a815).
# (1) qn's t_gpu_wonly by family, t_gpu_wonly_chain (4 repeats); racecheck on the chain suite (one row) and on
#     the split-K cluster cases; memcheck on the chain suite; (2) every marlin row, M = 1, 4, 8, 16, per layer
#     and chained, qb and qn with PRE = 0..4, three turns, the order of the six rotated each turn.
set -u
cd .dev
xz -dc qb.xz > qb; chmod +x qb
./zstd -q -d -f --long=27 --patch-from=qb qn.zst -o qn; chmod +x qn
mkdir -p tests
for t in t_gpu_wonly t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qn n-$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r148; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
run() { local name=$1; shift; ( s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt ) }
T0=$(date +%s)
for f in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$f run t_gpu_wonly-$f timeout 280 tests/t_gpu_wonly & done
run t_gpu_wonly_chain timeout 200 tests/t_gpu_wonly_chain &
QVET_WONLY_ROWS=marlin-w4a16-g128-zp-f16 run racecheck-chain-zp-f16 timeout 280 compute-sanitizer --tool racecheck tests/t_gpu_wonly_chain &
QVET_WONLY_ROWS=marlin-fp8a16-g128-bf16 run memcheck-chain-fp8-g128-bf16 timeout 280 compute-sanitizer --tool memcheck tests/t_gpu_wonly_chain &
QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w4a16-ch-f16 run racecheck-cluster-ch-f16 timeout 280 compute-sanitizer --tool racecheck tests/t_gpu_wonly &
wait
echo "suites secs=$(( $(date +%s) - T0 ))"
for f in $O/t_*.txt $O/*check*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "^FAIL\|:F:\|:E:" $O/t_*.txt $O/*check*.txt | head -6 | cut -c1-300
T1=$(date +%s)
C=(qb p0 p1 p2 p3 p4)
for t in 1 2 3; do for i in 0 1 2 3 4 5; do c=${C[$(( (i + 2 * t) % 6 ))]}; for mdl in llama3-70b llama2-7b; do
  b=qn; e=""
  case $c in qb) b=qb;; p*) e="QVET_WO_SMALL_PRE=${c#p}";; esac
  env $e timeout 60 ./$b bench --model $mdl --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant 'marlin-*' --out $O/ab-$c-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$c-$mdl-$t failed"
done; done; done
echo "bench secs=$(( $(date +%s) - T1 ))"
python3 ab.py $O qb p0 p1 p2 p3 p4 > $O/ab.txt 2>&1
python3 ab.py --summary $O qb p0 p1 p2 p3 p4 2>&1 | tee $O/ab-summary.txt
tar -C /tmp -czf $OUT/r148.tgz r148

# r34: g = 32 stages in two straight-line halves (C, the new default) and 8-bit grouped stages in one
# line (D, -DQV_WO_SMALL_FAST_8BIT_GROUPED=1) against 9699b17 (prev); t_gpu_wonly on C and D,
# racecheck, ncu warp states of C at M = 1.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
( ./build/tests/t_gpu_wonly > res/t_gpu_wonly-C.log 2>&1; echo "t_gpu_wonly C rc=$?" >> res/t_gpu_wonly-C.log ) &
P1=$!
( ./vd/t_gpu_wonly > res/t_gpu_wonly-D.log 2>&1; echo "t_gpu_wonly D rc=$?" >> res/t_gpu_wonly-D.log ) &
P2=$!
( QVET_WONLY_QUICK=1 QVET_WONLY_ROWS=marlin-w4a16-g32-f16 timeout 150 compute-sanitizer --tool racecheck ./build/tests/t_gpu_wonly > res/race-C-g32.log 2>&1
  echo "racecheck C g32 rc=$?" >> res/race-C-g32.log
  QVET_WONLY_QUICK=1 QVET_WONLY_ROWS=marlin-fp8a16-g128-bf16 timeout 150 compute-sanitizer --tool racecheck ./vd/t_gpu_wonly > res/race-D-fp8g128.log 2>&1
  echo "racecheck D fp8 g128 rc=$?" >> res/race-D-fp8g128.log ) &
P3=$!
wait $P1 $P2 $P3
for rep in 1 2; do
  for b in prev C D; do
    case $b in prev) Q=./prev/qvet;; C) Q=./build/qvet;; D) Q=./vd/qvet;; esac
    $Q bench --m 1,4,9,16 --runs 20 --variant 'marlin-*' --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?" >> res/bench-rc.txt
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu=$NCU" > res/ncu-where.txt
timeout 120 $NCU --clock-control none -k regex:k_gemm_wonly_small --launch-skip 0 --launch-count 4 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section LaunchStats --section Occupancy --section SourceCounters \
    ./build/qvet bench --m 1 --runs 1 --model llama3-70b --variant marlin-w4a16-ch-f16 > res/ncu-w4a16-ch-m1.txt 2>&1
echo "ncu rc=$?" >> res/ncu-where.txt
tar cf $OUT/r34.tar res
python3 - <<'PY' > $OUT/summary.txt
import json
def blk(f):
    d={}
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='bench' and r.get('layer')=='block': d[(r['variant'],r['model'],r['m'])]=r['median_us']
    return d
B=('prev','C','D')
runs={b:[blk(f'res/ab-{b}-{i}.jsonl') for i in (1,2)] for b in B}
for k in sorted(runs['prev'][0]):
    print('%-28s %-10s %3d '%k + ' '.join('%7.1f/%7.1f'%(runs[b][0].get(k,0),runs[b][1].get(k,0)) for b in B))
PY
cat res/bench-rc.txt res/ncu-where.txt
grep -h "RACECHECK SUMMARY\|rc=" res/race-*.log
for f in res/t_gpu_wonly-*.log; do echo "== $f"; grep -E "^[0-9]+%|rc=" $f | tail -3; done
grep llama3 $OUT/summary.txt | grep -E "g32|g128-f16|fp8a16-g128|w8a16-g128|w4a16-ch-f16"

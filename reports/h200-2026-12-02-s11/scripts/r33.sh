# r33: the straight-line small-M stages (final defaults): full t_gpu_wg and t_gpu_wonly, racecheck
# of the small-M kernel, same-run A/B against e8e94b8 at M = 1-16, the benchmark at every M.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p $R/res
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt
( ./build/tests/t_gpu_wg > res/t_gpu_wg.log 2>&1; echo "t_gpu_wg rc=$?" >> res/t_gpu_wg.log ) &
P1=$!
( ./build/tests/t_gpu_wonly > res/t_gpu_wonly.log 2>&1; echo "t_gpu_wonly rc=$?" >> res/t_gpu_wonly.log ) &
P2=$!
( for row in marlin-w4a16-g128-f16 marlin-fp8a16-ch-bf16 marlin-w4a16-ch-bf16; do
    QVET_WONLY_QUICK=1 QVET_WONLY_ROWS=$row timeout 150 compute-sanitizer --tool racecheck ./build/tests/t_gpu_wonly > res/race-$row.log 2>&1
    echo "racecheck $row rc=$?" >> res/race-$row.log
  done ) &
P3=$!
wait $P1 $P2 $P3
for rep in 1 2; do
  for b in base new; do
    case $b in base) Q=./base/qvet;; new) Q=./build/qvet;; esac
    $Q bench --m 1,4,9,16 --runs 20 --variant 'marlin-*' --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?" >> res/bench-rc.txt
  done
done
./build/qvet bench --m 1,4,9,16,32,64,128,256,512,1024 --runs 20 --variant 'marlin-*' --out res/r33-bench.jsonl > res/r33-bench.txt 2>&1
echo "bench all rc=$?" >> res/bench-rc.txt
tar cf $OUT/r33.tar res
python3 - <<'PY' > $OUT/summary.txt
import json
def blk(f):
    d={}
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='bench' and r.get('layer')=='block': d[(r['variant'],r['model'],r['m'])]=r['median_us']
    return d
runs={b:[blk(f'res/ab-{b}-{i}.jsonl') for i in (1,2)] for b in ('base','new')}
for k in sorted(runs['base'][0]):
    print('%-28s %-10s %3d '%k + ' '.join('%7.1f/%7.1f'%(runs[b][0].get(k,0),runs[b][1].get(k,0)) for b in ('base','new')))
PY
cat res/bench-rc.txt
grep -h "RACECHECK SUMMARY\|racecheck .* rc=" res/race-*.log
for f in res/t_gpu_wg.log res/t_gpu_wonly.log res/race-*.log; do echo "== $f"; grep -E "^[0-9]+%|Checks|rc=|FAIL|fail" $f | tail -4; done

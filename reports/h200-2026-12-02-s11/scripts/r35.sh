# r35: E = 4-bit symmetric codes in two kernels (channel/tensor, group) + g = 32 stages in two
# straight-line halves, against 9699b17 (prev); t_gpu_wonly and racecheck on E.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
( ./build/tests/t_gpu_wonly > res/t_gpu_wonly-E.log 2>&1; echo "t_gpu_wonly E rc=$?" >> res/t_gpu_wonly-E.log ) &
P1=$!
( for row in marlin-w4a16-g32-bf16 marlin-w4a16-ch-f16; do
    QVET_WONLY_QUICK=1 QVET_WONLY_ROWS=$row timeout 100 compute-sanitizer --tool racecheck ./build/tests/t_gpu_wonly > res/race-E-$row.log 2>&1
    echo "racecheck E $row rc=$?" >> res/race-E-$row.log
  done ) &
P2=$!
wait $P1 $P2
for rep in 1 2; do
  for b in prev E; do
    case $b in prev) Q=./prev/qvet;; E) Q=./build/qvet;; esac
    $Q bench --m 1,4,9,16 --runs 20 --variant 'marlin-w4a16-*,marlin-fp8a16-ch-f16' --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?" >> res/bench-rc.txt
  done
done
tar cf $OUT/r35.tar res
python3 - <<'PY' > $OUT/summary.txt
import json
def blk(f):
    d={}
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='bench' and r.get('layer')=='block': d[(r['variant'],r['model'],r['m'])]=r['median_us']
    return d
B=('prev','E')
runs={b:[blk(f'res/ab-{b}-{i}.jsonl') for i in (1,2)] for b in B}
for k in sorted(runs['prev'][0]):
    print('%-28s %-10s %3d '%k + ' '.join('%7.1f/%7.1f'%(runs[b][0].get(k,0),runs[b][1].get(k,0)) for b in B))
PY
cat res/bench-rc.txt
grep -h "RACECHECK SUMMARY\|rc=" res/race-*.log
grep -E "^[0-9]+%|rc=" res/t_gpu_wonly-E.log | tail -3
grep llama3 $OUT/summary.txt

# r43: cluster split-K with 2-per-SM shared memory; QQQ wgmma 16/32-token tiles (uncommitted on d767adc).
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r43.tar res; }
trap pack EXIT
( timeout 200 ./build/tests/t_gpu_aq > res/t_gpu_aq.log 2>&1; echo "t_gpu_aq rc=$?" >> res/t_gpu_aq.log ) &
( timeout 240 ./build/tests/t_gpu_aq_wg > res/t_gpu_aq_wg.log 2>&1; echo "t_gpu_aq_wg rc=$?" >> res/t_gpu_aq_wg.log ) &
( QVET_AQ_QUICK=1 timeout 200 compute-sanitizer --tool racecheck ./build/tests/t_gpu_aq_wg > res/race-wg.log 2>&1; echo "racecheck rc=$?" >> res/race-wg.log;
  QVET_AQ_QUICK=1 QVET_AQ_ROWS=qqq-w4a8-g128 timeout 100 compute-sanitizer --tool racecheck ./build/tests/t_gpu_aq > res/race-aq-g.log 2>&1; echo "racecheck rc=$?" >> res/race-aq-g.log ) &
wait
grep -E "^[0-9]+%|rc=|split sums|FAIL" res/t_gpu_aq.log | head -20
grep -E "^[0-9]+%|rc=|FAIL|block tiles" res/t_gpu_aq_wg.log | head -20
grep -h "SUMMARY\|rc=\|^[0-9]*%\|Failures" res/race-*.log
V='cublas-f16,qqq-*,w8a8-i8-*'
for turn in 1 2; do
  for b in base build wg1; do
    bin=$b; env=""; M=1,4,8,16,24,32
    if [ $b = wg1 ]; then bin=build; env="QVET_AQ_WG_MIN_M=1"; M=1,4,8,16; fi
    env $env timeout 100 ./$bin/qvet bench --m $M --runs 20 --variant "$V" --out res/ab-$b-$turn.jsonl > res/ab-$b-$turn.txt 2>&1
    echo "bench $b $turn rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt
python3 - <<'PY'
import json
def load(f):
    d={}
    for l in open(f):
        try: r=json.loads(l)
        except Exception: continue
        if r.get('kind')=='bench' and r.get('layer'): d[(r['variant'],r['model'],r['m'],r['layer'])]=r['median_us']
    return d
T={}
for b in ['base','build','wg1']:
    ds=[load('res/ab-%s-%d.jsonl'%(b,t)) for t in (1,2)]
    T[b]={k:(ds[0][k]+ds[1][k])/2 for k in ds[0] if k in ds[1]}
for k in sorted(T['build']):
    if not k[0].startswith('qqq') and k[3]!='block': continue
    b=T['base'].get(k); w=T['wg1'].get(k); n=T['build'][k]
    print('%-18s %-10s %2d %-8s base %7.1f new %7.1f %s'%(k[0],k[1],k[2],k[3],b or 0,n,'wg1 %7.1f'%w if w else ''))
PY

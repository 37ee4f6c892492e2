# r42: split-K sums of the aq mma kernel in thread-block clusters (uncommitted on d767adc):
# t_gpu_aq (with split_sums), chain, racecheck/memcheck quick on two rows; then A/B base (d767adc) vs build.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r42.tar res; }
trap pack EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > res/smi.txt 2>&1
( timeout 200 ./build/tests/t_gpu_aq > res/t_gpu_aq.log 2>&1; echo "t_gpu_aq rc=$?" >> res/t_gpu_aq.log ) &
( timeout 100 ./build/tests/t_gpu_aq_chain > res/t_gpu_aq_chain.log 2>&1; echo "chain rc=$?" >> res/t_gpu_aq_chain.log;
  QVET_AQ_QUICK=1 QVET_AQ_ROWS=qqq-w4a8-ch timeout 150 compute-sanitizer --tool racecheck ./build/tests/t_gpu_aq > res/race-qqq-ch.log 2>&1; echo "racecheck rc=$?" >> res/race-qqq-ch.log ) &
( QVET_AQ_QUICK=1 QVET_AQ_ROWS=w8a8-fp8-tok-ch timeout 150 compute-sanitizer --tool racecheck ./build/tests/t_gpu_aq > res/race-fp8.log 2>&1; echo "racecheck rc=$?" >> res/race-fp8.log;
  QVET_AQ_QUICK=1 QVET_AQ_ROWS=qqq-w4a8-g128 timeout 120 compute-sanitizer --tool memcheck ./build/tests/t_gpu_aq > res/mem-qqq-g.log 2>&1; echo "memcheck rc=$?" >> res/mem-qqq-g.log ) &
wait
grep -E "^[0-9]+%|rc=|split sums|FAIL" res/t_gpu_aq.log | head -40
grep -E "^[0-9]+%|rc=" res/t_gpu_aq_chain.log
grep -h "SUMMARY\|rc=\|^[0-9]*%" res/race-*.log res/mem-*.log
V='cublas-f16,qqq-*,w8a8-*'
for turn in 1 2; do
  for b in base build pdl16; do
    bin=$b; env=""
    if [ $b = pdl16 ]; then bin=build; env="QVET_AQ_PDL_MAX_M=16"; fi
    env $env timeout 90 ./$bin/qvet bench --m 1,4,8,16 --runs 20 --variant "$V" --out res/ab-$b-$turn.jsonl > res/ab-$b-$turn.txt 2>&1
    echo "bench $b $turn rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt
python3 - <<'PY'
import json,collections
def blk(f):
    d={}
    for l in open(f):
        try: r=json.loads(l)
        except Exception: continue
        if r.get('kind')=='bench' and r.get('layer')=='block': d[(r['variant'],r['model'],r['m'])]=r['median_us']
    return d
T={}
for b in ['base','build','pdl16']:
    ds=[blk('res/ab-%s-%d.jsonl'%(b,t)) for t in (1,2)]
    T[b]={k:(ds[0][k]+ds[1][k])/2 for k in ds[0] if k in ds[1]}
for k in sorted(T['base']):
    if k not in T['build'] or k not in T['pdl16']: continue
    print('%-26s %-10s %2d base %7.1f new %7.1f (%+5.1f%%) pdl16 %7.1f (%+5.1f%%)'%(k+(T['base'][k],T['build'][k],100*(T['build'][k]/T['base'][k]-1),T['pdl16'][k],100*(T['pdl16'][k]/T['base'][k]-1))))
PY

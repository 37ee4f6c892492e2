# r40: small-M K loop without a block barrier per stage, the last warp done with a slot refills it
# (new) against 87be2ad (base), M = 1-16, all marlin rows; t_gpu_wonly and racecheck of new.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r40.tar res; }
trap pack EXIT
( QVET_WONLY_QUICK=2 timeout 120 ./build/tests/t_gpu_wonly > res/t_quick2.log 2>&1; echo "quick2 rc=$?" >> res/t_quick2.log )
grep -E "^[0-9]+%|rc=" res/t_quick2.log
if ! grep -q "quick2 rc=0" res/t_quick2.log; then grep -v "^$" res/t_quick2.log | head -40; exit 1; fi
for rep in 1 2; do
  for b in base build; do
    timeout 200 ./$b/qvet bench --m 1,4,8,16 --runs 20 --variant 'marlin-*' --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt
python3 - <<'PY'
import json
def blk(f):
    d={}
    for l in open(f):
        try: r=json.loads(l)
        except Exception: continue
        if r.get('kind')=='bench' and r.get('layer')=='block': d[(r['variant'],r['model'],r['m'])]=r['median_us']
    return d
R={b:[blk(f'res/ab-{b}-{i}.jsonl') for i in (1,2)] for b in ('base','build')}
tot={}
for k in sorted(R['base'][0]):
    a=(R['base'][0][k]+R['base'][1][k])/2; c=(R['build'][0].get(k,0)+R['build'][1].get(k,0))/2
    if k[0].startswith('cublas'): continue
    key=(k[1],k[2]); t=tot.setdefault(key,[0,0]); t[0]+=a; t[1]+=c
    if k[0] in ('marlin-w4a16-ch-f16','marlin-w4a16-g128-f16','marlin-fp8a16-ch-f16','marlin-w8a16-g128-f16','marlin-w4a16-g32-f16'):
        print('%-26s %-10s %2d base %7.1f new %7.1f  %+5.1f%%'%(k+(a,c,100*(c/a-1))))
for k,(a,c) in sorted(tot.items()): print('sum', k, '%.1f -> %.1f %+.2f%%'%(a,c,100*(c/a-1)))
PY
( timeout 300 ./build/tests/t_gpu_wonly > res/t_gpu_wonly.log 2>&1; echo "t_gpu_wonly rc=$?" >> res/t_gpu_wonly.log ) &
( for row in marlin-w4a16-ch-f16 marlin-fp8a16-g128-bf16; do QVET_WONLY_QUICK=1 QVET_WONLY_ROWS=$row timeout 140 compute-sanitizer --tool racecheck ./build/tests/t_gpu_wonly > res/race-$row.log 2>&1; echo "racecheck $row rc=$?" >> res/race-$row.log; done ) &
wait
grep -E "^[0-9]+%|rc=" res/t_gpu_wonly.log
grep -h "RACECHECK SUMMARY\|rc=" res/race-*.log

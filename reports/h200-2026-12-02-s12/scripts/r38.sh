# r38: three blocks per SM for the swapped small-M kernels (b3: -DQV_WO_SMALL_SWAP_BPS=3) against
# 87be2ad (base), M = 1, 4, 8; t_gpu_wonly of main (e399a67 + occupancy switch at 2) and b3's small-M cases.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r38.tar res; }
trap pack EXIT
for rep in 1 2; do
  for b in base b3; do
    timeout 200 ./$b/qvet bench --m 1,4,8 --runs 20 --variant 'marlin-*' --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt
( timeout 420 ./build/tests/t_gpu_wonly > res/t_gpu_wonly-main.log 2>&1; echo "t_gpu_wonly main rc=$?" >> res/t_gpu_wonly-main.log ) &
( QVET_WONLY_QUICK=2 timeout 300 ./b3/t_gpu_wonly > res/t_gpu_wonly-b3.log 2>&1; echo "t_gpu_wonly b3 quick2 rc=$?" >> res/t_gpu_wonly-b3.log ) &
python3 - <<'PY'
import json
def blk(f):
    d={}
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='bench' and r.get('layer')=='block': d[(r['variant'],r['model'],r['m'])]=r['median_us']
    return d
R={b:[blk(f'res/ab-{b}-{i}.jsonl') for i in (1,2)] for b in ('base','b3')}
tot={'base':0,'b3':0}
for k in sorted(R['base'][0]):
    a=(R['base'][0][k]+R['base'][1][k])/2; c=(R['b3'][0].get(k,0)+R['b3'][1].get(k,0))/2
    if not k[0].startswith('cublas'): tot['base']+=a; tot['b3']+=c
    print('%-28s %-10s %2d base %7.1f b3 %7.1f  %+5.1f%%'%(k+(a,c,100*(c/a-1))))
print(tot)
PY
wait
grep -E "^[0-9]+%|rc=" res/t_gpu_wonly-*.log

# r41: last-warp refill for 8-bit codes (not bf16 with group scales), the final rule (new), against
# 87be2ad (base) on the 8-bit rows at M = 1, 4, 8, 16; t_gpu_wonly and racecheck of new.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r41.tar res; }
trap pack EXIT
V='cublas-f16,marlin-w8a16-*,marlin-fp8a16-*'
for rep in 1 2; do
  for b in base build; do
    timeout 100 ./$b/qvet bench --m 1,4,8,16 --runs 20 --variant "$V" --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
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
for k in sorted(R['base'][0]):
    a=(R['base'][0][k]+R['base'][1][k])/2; c=(R['build'][0].get(k,0)+R['build'][1].get(k,0))/2
    cb=(R['build'][0][('cublas-f16',k[1],k[2])]+R['build'][1][('cublas-f16',k[1],k[2])])/2
    print('%-26s %-10s %2d base %7.1f new %7.1f %+5.1f%% new %.2fx cuBLAS'%(k+(a,c,100*(c/a-1),cb/c)))
PY
( timeout 200 ./build/tests/t_gpu_wonly > res/t_gpu_wonly.log 2>&1; echo "t_gpu_wonly rc=$?" >> res/t_gpu_wonly.log ) &
( for row in marlin-fp8a16-ch-bf16 marlin-w8a16-g128-bf16 marlin-w8a16-ch-f16; do QVET_WONLY_QUICK=1 QVET_WONLY_ROWS=$row timeout 60 compute-sanitizer --tool racecheck ./build/tests/t_gpu_wonly > res/race-$row.log 2>&1; echo "racecheck $row rc=$?" >> res/race-$row.log; done ) &
wait
grep -E "^[0-9]+%|rc=" res/t_gpu_wonly.log
grep -h "RACECHECK SUMMARY\|rc=" res/race-*.log

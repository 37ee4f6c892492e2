# r37: streaming kernel rewrite (static first items, deferred arrivals): tests, time lines, A/B.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r37.tar res; }
trap pack EXIT
( QVET_WONLY_QUICK=3 timeout 240 ./build/tests/t_gpu_wonly > res/t_stream.log 2>&1; echo "t_stream rc=$?" >> res/t_stream.log )
grep -E "rc=|Checks" res/t_stream.log | tail -3; grep -B2 -A8 "failed\b" res/t_stream.log | grep -v " 0 failed" | head -30
if ! grep -q "t_stream rc=0" res/t_stream.log; then exit 1; fi
for mdl in llama2-7b llama3-70b; do
  QVET_WO_SMALL=stream QVET_WO_WG_MIN_M=17 QVET_WO_SMALL_TRACE=2 timeout 60 ./tl/qvet bench --model $mdl --m 1 --runs 3 --variant 'marlin-w4a16-ch-f16' --out res/tl-$mdl.jsonl > res/tl-$mdl.txt 2> res/tl-$mdl.err
  QVET_WO_SMALL=stream QVET_WO_WG_MIN_M=17 QVET_WO_STREAM_TILES=128 QVET_WO_SMALL_TRACE=2 timeout 60 ./tl/qvet bench --model $mdl --m 1 --runs 3 --variant 'marlin-w4a16-ch-f16' --out res/tl128-$mdl.jsonl > res/tl128-$mdl.txt 2> res/tl128-$mdl.err
done
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16'
for rep in 1 2; do
  for b in base stream; do
    case $b in base) Q="./base/qvet"; E="";; stream) Q="./build/qvet"; E="QVET_WO_SMALL=stream QVET_WO_WG_MIN_M=17";; esac
    env $E timeout 200 $Q bench --m 1,4,16 --runs 20 --variant "$V" --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt
for f in res/tl-*.err res/tl128-*.err; do echo "== $f"; grep timeline $f | awk '{key=$4" "$5; last[key]=$0} END{for(k in last) print last[k]}' | cut -c23-; done
python3 - <<'PY'
import json
def lay(f):
    d={}
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='bench': d[(r['variant'],r['model'],r['m'],r['layer'])]=r['median_us']
    return d
R={b:[lay(f'res/ab-{b}-{i}.jsonl') for i in (1,2)] for b in ('base','stream')}
for k in sorted(R['base'][0]):
    if k[0].startswith('cublas'): continue
    print('%-22s %-10s %2d %-8s'%k + ' base %7.1f %7.1f stream %7.1f %7.1f'%(R['base'][0][k],R['base'][1][k],R['stream'][0].get(k,0),R['stream'][1].get(k,0)))
PY

# r36: the persistent streaming kernel (QVET_WO_SMALL=stream) first on the GPU: its test cases,
# same-run A/B against 87be2ad (base) at M = 1-16, a sweep of its item length, racecheck.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt
pack() { tar cf $OUT/r36.tar res; }
trap pack EXIT
( QVET_WONLY_QUICK=3 timeout 240 ./build/tests/t_gpu_wonly > res/t_stream.log 2>&1; echo "t_stream rc=$?" >> res/t_stream.log )
grep -E "streaming-kernel cases|rc=|Checks" res/t_stream.log | tail -25
if ! grep -q "t_stream rc=0" res/t_stream.log; then grep -v "^$" res/t_stream.log | head -60; exit 1; fi
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-w4a16-g32-f16,marlin-w4a16-g128-zp-f16,marlin-w4a16-g128-act-f16,marlin-fp8a16-ch-f16,marlin-w8a16-g128-bf16,marlin-fp8a16-tensor-bf16'
for rep in 1 2; do
  for b in base stream; do
    case $b in base) Q="./base/qvet"; E="";; stream) Q="./build/qvet"; E="QVET_WO_SMALL=stream";; esac
    env $E timeout 200 $Q bench --m 1,4,9,16 --runs 20 --variant "$V" --out res/ab-$b-$rep.jsonl > res/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?" >> res/bench-rc.txt
  done
done
for t in 8 16 32 64 128; do
  QVET_WO_SMALL=stream QVET_WO_WG_MIN_M=17 QVET_WO_STREAM_TILES=$t timeout 120 ./build/qvet bench --m 1,16 --runs 20 --variant 'marlin-w4a16-ch-f16,marlin-fp8a16-ch-f16,marlin-w4a16-g128-f16' --out res/sweep-$t.jsonl > res/sweep-$t.txt 2>&1
  echo "sweep $t rc=$?" >> res/bench-rc.txt
done
QVET_WO_SMALL=stream QVET_WO_WG_MIN_M=17 timeout 120 ./build/qvet bench --m 1,9,16 --runs 20 --variant 'marlin-w4a16-ch-f16,marlin-fp8a16-ch-f16,marlin-w4a16-g128-f16' --out res/sweep-0.jsonl > res/sweep-0.txt 2>&1
echo "sweep 0 rc=$?" >> res/bench-rc.txt
QVET_WONLY_QUICK=3 QVET_WONLY_ROWS=marlin-w4a16-g128-zp-f16 timeout 150 compute-sanitizer --tool racecheck ./build/tests/t_gpu_wonly > res/race-zp.log 2>&1; echo "racecheck rc=$?" >> res/race-zp.log
cat res/bench-rc.txt
grep -h "RACECHECK SUMMARY\|rc=" res/race-*.log
python3 - <<'PY'
import json,glob
def blk(f):
    d={}
    try:
        for l in open(f):
            r=json.loads(l)
            if r.get('kind')=='bench' and r.get('layer') in ('block',): d[(r['variant'],r['model'],r['m'])]=r['median_us']
    except FileNotFoundError: pass
    return d
runs={b:[blk(f'res/ab-{b}-{i}.jsonl') for i in (1,2)] for b in ('base','stream')}
for k in sorted(runs['base'][0]):
    a=[runs['base'][i].get(k,0) for i in (0,1)]; s=[runs['stream'][i].get(k,0) for i in (0,1)]
    print('%-26s %-10s %3d '%k + 'base %7.1f/%7.1f stream %7.1f/%7.1f'%(a[0],a[1],s[0],s[1]))
print('sweep (block us) tiles: 0 8 16 32 64 128')
sw={t:blk(f'res/sweep-{t}.jsonl') for t in (0,8,16,32,64,128)}
for k in sorted(sw[8]):
    print('%-26s %-10s %3d '%k + ' '.join('%7.1f'%sw[t].get(k,0) for t in (0,8,16,32,64,128)))
PY

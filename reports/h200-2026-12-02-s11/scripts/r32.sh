# r32: correctness of the nine-tile build (full t_gpu_wg), t_gpu_wonly on the straight-line small-M
# stages, an A/B of the small-M kernel (base = e8e94b8, A = straight-line stages for grouped int4,
# B = grouped row by row + straight-line 8-bit), routing at M = 1-64, ncu of A at M = 1.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
( ./build/tests/t_gpu_wg > $OUT/t_gpu_wg.log 2>&1; echo "t_gpu_wg rc=$?" >> $OUT/t_gpu_wg.log ) &
P1=$!
( ./build/tests/t_gpu_wonly > $OUT/t_gpu_wonly.log 2>&1; echo "t_gpu_wonly rc=$?" >> $OUT/t_gpu_wonly.log ) &
P2=$!
wait $P1 $P2
tail -3 $OUT/t_gpu_wg.log $OUT/t_gpu_wonly.log
for rep in 1 2; do
  for b in base A B; do
    case $b in base) Q=./base/qvet;; A) Q=./build/qvet;; B) Q=./vb/qvet;; esac
    $Q bench --m 1,4,9,16 --runs 20 --variant 'marlin-*' --out $OUT/ab-$b-$rep.jsonl > $OUT/ab-$b-$rep.txt 2>&1
    echo "bench $b $rep rc=$?"
  done
done
./build/qvet bench --m 1,4,9,16,32,64 --runs 20 --variant 'marlin-*' --out $OUT/r32-bench.jsonl > $OUT/r32-bench.txt 2>&1
echo "bench all rc=$?"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu=$NCU"
for v in marlin-w4a16-ch-f16 marlin-w4a16-g128-f16; do
  timeout 100 $NCU --clock-control none -k regex:k_gemm_wonly_small --launch-skip 0 --launch-count 4 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section LaunchStats --section Occupancy --section SourceCounters \
    ./build/qvet bench --m 1 --runs 1 --model llama3-70b --variant $v > $OUT/ncu-$v.txt 2>&1
  echo "ncu $v rc=$?"
done
python3 - <<'PY'
import json,os,glob
out=os.environ['OUT']
def blk(f):
    d={}
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='bench' and r.get('layer')=='block': d[(r['variant'],r['model'],r['m'])]=r['median_us']
    return d
runs={b:[blk(f'{out}/ab-{b}-{i}.jsonl') for i in (1,2)] for b in ('base','A','B')}
keys=sorted(runs['base'][0])
for k in keys:
    if k[1]!='llama3-70b': continue
    print('%-28s %5d '%(k[0],k[2]) + ' '.join('%7.1f/%7.1f'%(runs[b][0].get(k,0),runs[b][1].get(k,0)) for b in ('base','A','B')))
PY

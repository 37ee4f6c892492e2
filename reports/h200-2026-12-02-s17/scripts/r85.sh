#!/bin/bash
# r85: qf = HEAD's device code (r84); qp = qf with the g = 32 instances making each group row
# into registers once per two k16 tiles. t_gpu_wg (full) on the g = 32 rows and racecheck of qp;
# qf / qp in turns on the g = 32 rows (w4a16-ch-f16 as the control), M = 256 and 1024, three turns.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qf qp; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
./zstd -q -d -f --long=27 --patch-from=qp t_gpu_wg.zst -o t_gpu_wg
chmod +x q0 qf qp t_gpu_wg
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
i=0
for pat in 'marlin-w4a16-g32-f16' 'marlin-w4a16-g32-bf16'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 300 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt > $OUT/t_gpu_wg.txt
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g32-f16' timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-g32-f16.txt 2>&1; echo "racecheck rc=$?"
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-*.txt
grep -E 'Checks|real|FAIL' $OUT/t_gpu_wg.txt | head
V='marlin-w4a16-ch-f16,marlin-w4a16-g32-f16,marlin-w4a16-g32-bf16'
for t in 1 2 3; do for b in qf qp; do
  timeout 200 ./$b bench --m 64,256,1024 --runs 20 --passes 1 --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q?-*.jsonl > $OUT/ab.jsonl
python3 - <<'PY'
import json,os,collections,glob
B=['qf','qp']
res=collections.defaultdict(lambda: collections.defaultdict(list))
for b in B:
  for f in glob.glob(f'{b}-*.jsonl'):
    for l in open(f):
      d=json.loads(l)
      if d.get('kind')=='bench' and d.get('layer')=='block' and d['variant']!='cublas-f16':
        res[(d['variant'][7:],d['model'][-3:],d['m'])][b].append((d['median_us'],d['vs_cublas']))
for k in sorted(res):
  v=res[k]; print(f"{k[0]:20s} {k[1]} {k[2]:5d}", ' '.join(f"{b}={sum(x[0] for x in v[b])/max(1,len(v[b])):.1f}({sum(x[1] for x in v[b])/max(1,len(v[b])):.3f})" for b in B))
PY

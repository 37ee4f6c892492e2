#!/bin/bash
# r79: qs = the group scales' registers by byte permutes (on top of r77's qn): t_gpu_wonly and
# t_gpu_wg full (all rows) side by side, racecheck on a g32 row; qn / qs in turns on the grouped rows.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qn.zst -o qn; ./zstd -q -d -f --long=27 --patch-from=q0 qs.zst -o qs
for b in t_gpu_wg t_gpu_wonly; do ./zstd -q -d -f --long=27 --patch-from=qs $b.zst -o $b; done
chmod +x q0 qn qs t_*
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( time timeout 420 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1 &
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 420 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt wg3.txt wg4.txt > $OUT/t_gpu_wg.txt
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g32-bf16' timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-wg.txt 2>&1; echo "racecheck rc=$?"
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-wg.txt
grep -E 'Checks|real' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt
V='marlin-w4a16-g32-f16,marlin-w4a16-g32-bf16,marlin-w4a16-g128-f16,marlin-w4a16-g128-zp-f16,marlin-w8a16-g128-bf16,marlin-fp8a16-g128-bf16'
for t in 1 2; do for b in qn qs; do
  ./$b bench --m 16,64,1024 --runs 20 --passes 1 --variant "$V" --out $OUT/$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
python3 - <<'PY'
import json,os,collections
O=os.environ['OUT']
res=collections.defaultdict(lambda: collections.defaultdict(list))
for b in ['qn','qs']:
  for t in [1,2]:
    for l in open(f'{O}/{b}-{t}.jsonl'):
      d=json.loads(l)
      if d.get('kind')=='bench' and d.get('layer')=='block' and d['variant']!='cublas-f16':
        res[(d['variant'][7:],d['model'][-3:],d['m'])][b].append((d['median_us'],d['vs_cublas']))
for k in sorted(res):
  v=res[k]; print(f"{k[0]:20s} {k[1]} {k[2]:5d}", ' '.join(f"{b}={sum(x[0] for x in v[b])/2:.1f}({sum(x[1] for x in v[b])/2:.3f})" for b in ['qn','qs']))
PY

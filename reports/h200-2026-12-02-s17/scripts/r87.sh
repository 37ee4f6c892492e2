#!/bin/bash
# r87: qa = HEAD a5868b5 + the act_order GEMM launched as a programmatic dependent of the
# permutation kernel. t_gpu_wg (full) on the act_order rows and racecheck of qa; qh2 (a5868b5) /
# qa in turns on the act_order rows (w4a16-g128-f16 as the control), M = 64, 256, 1024, three
# turns; then every weight-only row with qa, paired with cuBLAS fp16.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qh2 qa; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
./zstd -q -d -f --long=27 --patch-from=qa t_gpu_wg.zst -o t_gpu_wg
chmod +x q0 qh2 qa t_gpu_wg
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
i=0
for pat in 'marlin-w4a16-g128-act-f16' 'marlin-w4a16-g128-act-bf16'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 300 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt > $OUT/t_gpu_wg.txt
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g128-act-f16' timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-act-f16.txt 2>&1; echo "racecheck rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g128-act-bf16' timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wg ) > $OUT/memcheck-act-bf16.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $OUT/racecheck-*.txt $OUT/memcheck-*.txt
grep -E 'Checks|cases|FAIL' $OUT/t_gpu_wg.txt | head
V='marlin-w4a16-g128-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16'
for t in 1 2 3; do for b in qh2 qa; do
  timeout 200 ./$b bench --m 64,256,1024 --runs 20 --passes 1 --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q*-*.jsonl > $OUT/ab.jsonl
python3 - <<'PY'
import json,os,collections,glob
B=['qh2','qa']
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
( time ./qa bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1 ) 2>&1; echo "wo rc=$?"
python3 - <<'PY'
import json,os
O=os.environ['OUT']
rows=[json.loads(l) for l in open(f'{O}/wo.jsonl')]
for md in ['llama2-7b','llama3-70b']:
    b=[r for r in rows if r.get('kind')=='bench' and r['model']==md and r['layer']=='block' and r['m']==1024 and r['variant']!='cublas-f16']
    print(md, 'M=1024 >=0.9x:', sum(r['vs_cublas']>=0.9 for r in b), '/', len(b), 'below:', [(r['variant'][7:],round(r['vs_cublas'],3)) for r in b if r['vs_cublas']<0.9])
PY

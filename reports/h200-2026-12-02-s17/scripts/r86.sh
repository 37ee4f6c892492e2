#!/bin/bash
# r86: qh2 = HEAD a5868b5 (every change of the round); qr = qh2 with one row per block in the
# act_order permutation kernel. qh2 / qr in turns on the act_order rows (M = 64, 256, 1024),
# three turns; then the round's table with qh2 (every weight-only row, paired with cuBLAS fp16).
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qh2 qr; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
chmod +x q0 qh2 qr
V='marlin-w4a16-g128-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16'
for t in 1 2 3; do for b in qh2 qr; do
  timeout 200 ./$b bench --m 64,256,1024 --runs 20 --passes 1 --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q*-*.jsonl > $OUT/ab.jsonl
python3 - <<'PY'
import json,os,collections,glob
B=['qh2','qr']
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
( time ./qh2 bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1 ) 2>&1; echo "wo rc=$?"
python3 - <<'PY'
import json,os
O=os.environ['OUT']
rows=[json.loads(l) for l in open(f'{O}/wo.jsonl')]
for md in ['llama2-7b','llama3-70b']:
    b=[r for r in rows if r.get('kind')=='bench' and r['model']==md and r['layer']=='block' and r['m']==1024 and r['variant']!='cublas-f16']
    print(md, 'M=1024 >=0.9x:', sum(r['vs_cublas']>=0.9 for r in b), '/', len(b), 'below:', [(r['variant'][7:],round(r['vs_cublas'],3)) for r in b if r['vs_cublas']<0.9])
PY

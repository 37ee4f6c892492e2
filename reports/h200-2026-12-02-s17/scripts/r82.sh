#!/bin/bash
# r82: q0 = HEAD (cef8128), qd = the carried descriptor, qz = qd with the one-constant zero points
# (f16) and the bit-moved bf16 fp8 codes: in turns, twice, on the rows they change, M = 256 and 1024.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qd qz; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
chmod +x q0 qd qz
V='marlin-w4a16-ch-f16,marlin-w4a16-g32-f16,marlin-w4a16-g32-bf16,marlin-w4a16-g128-zp-f16,marlin-w4a16-g128-zp-bf16,marlin-w8a16-g128-bf16,marlin-fp8a16-g128-bf16,marlin-fp8a16-g128-f16,marlin-w4a16-g128-act-f16'
for t in 1 2; do for b in q0 qd qz; do
  ( time timeout 200 ./$b bench --m 256,1024 --runs 20 --passes 1 --variant "$V" --out $OUT/$b-$t.jsonl ) > $OUT/$b-$t.txt 2>&1 || echo "$b-$t failed"
done; done
grep real $OUT/q*-1.txt
python3 - <<'PY'
import json,os,collections
O=os.environ['OUT']
B=['q0','qd','qz']
res=collections.defaultdict(lambda: collections.defaultdict(list))
for b in B:
  for t in [1,2]:
    try: f=open(f'{O}/{b}-{t}.jsonl')
    except OSError: continue
    for l in f:
      d=json.loads(l)
      if d.get('kind')=='bench' and d.get('layer')=='block' and d['variant']!='cublas-f16':
        res[(d['variant'][7:],d['model'][-3:],d['m'])][b].append((d['median_us'],d['vs_cublas']))
for k in sorted(res):
  v=res[k]; print(f"{k[0]:20s} {k[1]} {k[2]:5d}", ' '.join(f"{b}={sum(x[0] for x in v[b])/max(1,len(v[b])):.1f}({sum(x[1] for x in v[b])/max(1,len(v[b])):.3f})" for b in B))
PY

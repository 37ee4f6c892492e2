#!/bin/bash
# r78: this round's benchmark (qn = the device code of r77): every weight-only row, paired with cuBLAS fp16;
# and the QQQ rows before (q0) and after (qn) the descriptor change, twice each.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qn.zst -o qn; chmod +x q0 qn
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 200 > $OUT/smi.csv &
SMI=$!
./qn bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1; echo "wo rc=$?"
for t in 1 2; do for b in q0 qn; do
  ./$b bench --m 256,1024 --runs 20 --passes 1 --variant 'qqq-*' --out b-$b-$t.jsonl > /dev/null 2>&1 || echo "$b qqq failed"
done; done
kill $SMI
cat b-*.jsonl > $OUT/qqq.jsonl
python3 - <<'PY'
import json,os,collections,glob
O=os.environ['OUT']
rows=[json.loads(l) for l in open(f'{O}/wo.jsonl')]
for md in ['llama2-7b','llama3-70b']:
    b=[r for r in rows if r.get('kind')=='bench' and r['model']==md and r['layer']=='block' and r['m']==1024 and r['variant']!='cublas-f16']
    print(md, 'M=1024 >=0.9x:', sum(r['vs_cublas']>=0.9 for r in b), '/', len(b), 'below:', [(r['variant'][7:],round(r['vs_cublas'],3)) for r in b if r['vs_cublas']<0.9])
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob('b-*.jsonl'):
    bb=f.split('-')[1]
    for l in open(f):
        d=json.loads(l)
        if d.get('kind')!='bench' or d.get('layer')!='block' or not d['variant'].startswith('qqq'): continue
        res[(d['model'],d['m'],d['variant'])][bb].append(d['median_us'])
for k in sorted(res):
    v=res[k]; print(k[0][:7],k[1],k[2].ljust(16),' '.join(f"{bb}={sum(x)/len(x):.1f}" for bb,x in sorted(v.items())))
PY
tail -2 $OUT/wo.txt

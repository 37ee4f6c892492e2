#!/bin/bash
# r84: HEAD's device code (qf): every weight-only row, paired with cuBLAS fp16 (the round's table)
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qf.zst -o qf; chmod +x qf
( time ./qf bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1 ) 2>&1; echo "wo rc=$?"
python3 - <<'PY'
import json,os
O=os.environ['OUT']
rows=[json.loads(l) for l in open(f'{O}/wo.jsonl')]
for md in ['llama2-7b','llama3-70b']:
    b=[r for r in rows if r.get('kind')=='bench' and r['model']==md and r['layer']=='block' and r['m']==1024 and r['variant']!='cublas-f16']
    print(md, 'M=1024 >=0.9x:', sum(r['vs_cublas']>=0.9 for r in b), '/', len(b), 'below:', [(r['variant'][7:],round(r['vs_cublas'],3)) for r in b if r['vs_cublas']<0.9])
for v in ['marlin-w4a16-ch-f16','marlin-fp8a16-ch-f16','marlin-fp8a16-tensor-f16','marlin-fp8a16-ch-bf16','marlin-fp8a16-g128-bf16']:
    for md in ['llama2-7b','llama3-70b']:
        b=[r for r in rows if r.get('kind')=='bench' and r['model']==md and r['layer']=='block' and r['variant']==v and r['m'] in (1,4,16)]
        print(v, md, [(r['m'], round(r['median_us'],1), round(r['vs_cublas'],3), round(r['floor_fraction'],3)) for r in b])
PY

#!/bin/bash
# r95: every weight-only row with qs3 (this round's HEAD device code), paired with cuBLAS fp16.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qs3.zst -o qs3
chmod +x qs3
export QVET_GOLDEN=$PWD/golden
( time ./qs3 bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1 ) 2>&1; echo "wo rc=$?"
python3 - <<'PY'
import json,os
O=os.environ['OUT']
rows=[json.loads(l) for l in open(f'{O}/wo.jsonl')]
for md in ['llama2-7b','llama3-70b']:
    b=[r for r in rows if r.get('kind')=='bench' and r['model']==md and r['layer']=='block' and r['m']==1024 and r['variant']!='cublas-f16']
    print(md, 'M=1024 >=0.9x:', sum(r['vs_cublas']>=0.9 for r in b), '/', len(b), 'below:', [(r['variant'][7:],round(r['vs_cublas'],3)) for r in b if r['vs_cublas']<0.9])
    for v in ['marlin-w4a16-ch-f16','marlin-fp8a16-ch-f16','marlin-fp8a16-tensor-f16']:
        print(' ', v, [(r['m'], round(r['median_us'],1), round(r['vs_cublas'],2), round(r.get('floor_fraction',0),3)) for r in rows if r.get('kind')=='bench' and r['model']==md and r['layer']=='block' and r['variant']==v and r['m']<=16])
PY

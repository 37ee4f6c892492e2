#!/bin/bash
# r62: the wgmma weight-only kernel's epilogue, bounded: q0 = HEAD, q1 = no
# global stores in the epilogue, q2 = no epilogue at all (both give wrong output;
# measurement only).
cd .dev
tar xJf bins.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/smi.txt
R="cublas-f16,marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16,marlin-w8a16-g128-bf16,marlin-w4a16-g32-f16"
for t in 1 2; do for b in q0 q1 q2; do
  ./$b bench --m 256,1024 --runs 20 --passes 1 --variant "$R" --out $OUT/$b-$t.jsonl > $OUT/$b-$t.txt 2>&1 || echo "$b failed"
done; done
python3 - <<'PY'
import json,os
O=os.environ['OUT']
res={}
for t in (1,2):
  for b in ('q0','q1','q2'):
    for l in open(f'{O}/{b}-{t}.jsonl'):
      d=json.loads(l)
      if d.get('kind')!='bench' or d.get('layer') not in ('qkv','o','gate_up','down','block'): continue
      res.setdefault((d['model'],d['m'],d['variant'],d['layer']),{}).setdefault(b,[]).append(d['median_us'])
for k in sorted(res):
  v=res[k]; print(k, ' '.join(f"{b}={sum(v[b])/len(v[b]):.1f}" for b in ('q0','q1','q2') if b in v))
PY

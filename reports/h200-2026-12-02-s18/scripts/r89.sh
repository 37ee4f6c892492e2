#!/bin/bash
# r89: where the M <= 16 time goes. q0 = HEAD (a6a7deb); qn = q0 with the small-M K loop's math
# taken out (-DQV_WO_SMALL_NO_MATH=1: the ring alone, wrong results); q5 / q6 = q0 with 5 / 6
# ring stages of 16 KiB; q0 with QVET_WO_SMALL=swap2 (two chunks per warp for 4-bit codes).
# Llama-3-70B and Llama-2-7B, M = 1 and 4, in turns; per-layer medians; then the plans.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qn q5 q6; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
chmod +x q0 qn q5 q6
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16,marlin-w8a16-g128-f16'
for t in 1 2; do for b in q0 qn q5 q6 q0s; do
  if [ $b = q0s ]; then exe=q0; env="QVET_WO_SMALL=swap2"; else exe=$b; env="X=1"; fi
  env $env timeout 200 ./$exe bench --m 1,4 --runs 20 --passes 1 --no-pair --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q*-*.jsonl > $OUT/ab.jsonl
python3 - <<'PY'
import json,collections,glob
B=['q0','qn','q5','q6','q0s']
res=collections.defaultdict(lambda: collections.defaultdict(list))
for b in B:
  for f in glob.glob(f'{b}-*.jsonl'):
    for l in open(f):
      d=json.loads(l)
      if d.get('kind')=='bench' and d['variant']!='cublas-f16' and d.get('layer')!='chain':
        res[(d['model'][-3:],d['variant'][7:],d['m'],d['layer'])][b].append(d['median_us'])
print('model variant M layer', ' '.join(B))
for k in sorted(res):
  v=res[k]; print(*k, ' '.join(f"{sum(v[b])/max(1,len(v[b])):.1f}" for b in B))
PY
for m in 1 4 16; do QVET_WO_SMALL_TRACE=1 ./q0 bench --model llama3-70b --m $m --runs 1 --passes 1 --no-pair --variant marlin-fp8a16-ch-f16,marlin-w4a16-ch-f16 2>&1 | grep -i -E "plan|split|cluster" | head -12; done

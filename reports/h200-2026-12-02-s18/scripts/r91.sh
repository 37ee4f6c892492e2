#!/bin/bash
# r91: the small-M plan, per layer: q0 (HEAD's kernel) under the default plan, under a cap on the
# cluster size (QVET_WO_SMALL_CLUSTER = 1, 2, 4) and under forced K slices (QVET_WO_SMALL_SPLITS);
# fp8a16-ch-f16 and w4a16-ch-f16, both models, M = 1, 4, 16, two turns.
set -u
cd .dev
xz -dc qvet.xz > q0
chmod +x q0
export QVET_GOLDEN=$PWD/golden
V='marlin-w4a16-ch-f16,marlin-fp8a16-ch-f16'
for t in 1 2; do
  for c in def c1 c2 c4 s4 s6 s8 s10 s12 s16 s24 s32; do
    case $c in def) env="X=1";; c*) env="QVET_WO_SMALL_CLUSTER=${c#c}";; s*) env="QVET_WO_SMALL_SPLITS=${c#s}";; esac
    env $env timeout 100 ./q0 bench --m 1,4,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $c-$t.jsonl > /dev/null 2>&1 || echo "$c-$t failed"
  done
done
cat *-1.jsonl *-2.jsonl > $OUT/plan.jsonl
python3 - <<'PY'
import json,collections,glob,re
C=['def','c1','c2','c4','s4','s6','s8','s10','s12','s16','s24','s32']
res=collections.defaultdict(lambda: collections.defaultdict(list))
for c in C:
  for f in glob.glob(f'{c}-*.jsonl'):
    for l in open(f):
      try: d=json.loads(l)
      except Exception: continue
      if d.get('kind')=='bench' and d['variant'].startswith('marlin') and d['layer']!='chain':
        res[(d['model'][-3:],d['variant'][7:],d['m'],d['layer'])][c].append(d['median_us'])
print('model variant M layer', ' '.join(C))
for k in sorted(res):
  v=res[k]; print(*k, ' '.join(f"{sum(v[c])/len(v[c]):.1f}" if v[c] else '-' for c in C))
PY

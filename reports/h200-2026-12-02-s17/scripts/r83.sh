#!/bin/bash
# r83: qh = HEAD a31c788 (the wgmma kernel of r81/r82); qm = qh with the small-M kernel's
# one-constant zero points and bit-moved bf16 fp8 group codes. t_gpu_wonly of qm (full) and
# racecheck on its small-M split-K cases; qh / qm in turns on the rows the change touches, M <= 16.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qh qm; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
./zstd -q -d -f --long=27 --patch-from=qm t_gpu_wonly.zst -o t_gpu_wonly
chmod +x q0 qh qm t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( time timeout 420 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1
for r in marlin-w4a16-g128-zp-f16 marlin-fp8a16-g128-bf16; do
  ( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS="$r" timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wonly ) > $OUT/racecheck-$r.txt 2>&1; echo "racecheck $r rc=$?"
done
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-*.txt
grep -E 'Checks|real|FAIL' $OUT/t_gpu_wonly.txt | head
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-zp-f16,marlin-w4a16-g128-zp-bf16,marlin-fp8a16-g128-bf16,marlin-fp8a16-g128-f16'
for t in 1 2 3; do for b in qh qm; do
  timeout 200 ./$b bench --m 1,4,16 --runs 20 --passes 1 --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q*-*.jsonl > $OUT/ab.jsonl
python3 - <<'PY'
import json,os,collections,glob
B=['qh','qm']
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

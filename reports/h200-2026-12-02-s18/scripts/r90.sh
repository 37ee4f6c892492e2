#!/bin/bash
# r90: the read floor per layer (tools/probe-read.cu), and the small-M kernel's time line
# (qt = -DQV_WO_SMALL_TIMELINE; qtn = the same without the math) on Llama-3-70B and -2-7B,
# M = 1 and 4, w4a16-ch-f16 and fp8a16-ch-f16.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qt qtn; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; done
chmod +x q0 qt qtn probe-read
export QVET_GOLDEN=$PWD/golden
./probe-read > $OUT/probe-read.txt 2>&1; echo "probe rc=$?"
for b in qt qtn; do for m in 1 4; do for v in w4a16-ch-f16 fp8a16-ch-f16; do
  QVET_WO_SMALL_TRACE=2 timeout 100 ./$b bench --m $m --runs 5 --passes 1 --no-pair --variant marlin-$v > /dev/null 2> $b-$m-$v.txt || echo "$b $m $v failed"
done; done; done
grep -H "timeline" qt*-*.txt > $OUT/timeline.txt
python3 - <<'PY'
import re,collections,glob
rows=collections.defaultdict(list)
for f in sorted(glob.glob('qt*-*.txt')):
  b,m,v=f[:-4].split('-',2)
  for l in open(f):
    if 'timeline' not in l: continue
    g=dict(re.findall(r'(\w+)=([\d./]+)', l))
    rows[(v,b,g['m'],g['n'],g['k'])].append(l.split('span=')[1].strip())
for k in sorted(rows):
  v=rows[k]; print(*k, '|', v[-1])
PY
cat $OUT/probe-read.txt

#!/bin/bash
# r96: the time line of this round's HEAD (qt2 = -DQV_WO_SMALL_TIMELINE=1 on dfee356's kernel),
# the same launches as r90's qt: w4a16-ch-f16 and fp8a16-ch-f16, M = 1 and 4, both models.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qt2.zst -o qt2
chmod +x qt2
export QVET_GOLDEN=$PWD/golden
for m in 1 4; do for v in w4a16-ch-f16 fp8a16-ch-f16; do
  QVET_WO_SMALL_TRACE=2 timeout 100 ./qt2 bench --m $m --runs 5 --passes 1 --no-pair --variant marlin-$v > /dev/null 2> qt2-$m-$v.txt || echo "qt2 $m $v failed"
done; done
grep -H "timeline" qt2-*.txt > $OUT/timeline.txt
python3 - <<'PY'
import re,collections,statistics as st
rows=collections.defaultdict(list)
for l in open('/root/out/timeline.txt' if False else __import__('os').environ['OUT']+'/timeline.txt'):
  f,rest=l.split(':',1)
  b,m,v=f[:-4].split('-',2)
  g=dict(re.findall(r'(\w+)=([\d./]+)', rest))
  le=[float(x) for x in g['loop_end'].split('/')]
  rows[(v,m,int(g['n']),int(g['k']))].append((float(g['span']),le[2]))
for k in sorted(rows):
  v=rows[k]
  print(*k, f"span {st.median(x[0] for x in v):.2f} tail {st.median(x[0]-x[1] for x in v):.2f}")
PY

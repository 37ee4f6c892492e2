#!/bin/bash
# r71: the staged epilogues on a barrier per warpgroup again, both warpgroups
# always running it (qb), against HEAD (qn: one barrier of both).
set -u
cd .dev
./zstd -q -d -f qold.zst -o q; chmod +x q
./zstd -q -d --long=27 --patch-from=q qn.patch.zst -o qn; chmod +x qn
./zstd -q -d --long=27 --patch-from=qn qb.patch.zst -o qb; chmod +x qb
for b in t_gpu_aq_wg t_gpu_wg; do ./zstd -q -d --long=27 --patch-from=qb $b.patch.zst -o $b; chmod +x $b; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( QVET_AQ_QUICK=1 timeout 120 compute-sanitizer --tool racecheck ./t_gpu_aq_wg ) > $OUT/racecheck-aq-wg.txt 2>&1; echo "racecheck aq_wg rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g128-f16' timeout 120 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-wg.txt 2>&1; echo "racecheck wg rc=$?"
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-aq-wg.txt $OUT/racecheck-wg.txt
R="cublas-f16,qqq-w4a8-ch,marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16"
for t in 1 2; do for b in qn qb; do
  ./$b bench --m 256,1024 --runs 20 --passes 1 --variant "$R" --out b-$b-$t.jsonl > /dev/null 2>&1 || echo "$b bench failed"
done; done
cat b-*.jsonl > $OUT/bench.jsonl
python3 - <<'PY'
import json,collections,glob
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob('b-*.jsonl'):
    b=f.split('-')[1]
    for l in open(f):
        d=json.loads(l)
        if d.get('kind')!='bench' or d.get('layer')!='block': continue
        res[(d['model'],d['m'],d['variant'])][b].append(d['median_us'])
for k in sorted(res):
    v=res[k]
    print(k[0][:7],k[1],k[2].ljust(24),' '.join(f"{b}={sum(x)/len(x):.1f}" for b,x in sorted(v.items())))
PY

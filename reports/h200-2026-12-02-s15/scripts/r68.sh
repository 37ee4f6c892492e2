#!/bin/bash
# r68: both consumer warpgroups take the same barriers in the staged epilogue (both wgmma kernels);
# both suites' quick passes, t_gpu_aq_wg full and t_gpu_wg quick.
set -u
cd .dev
./zstd -q -d -f qold.zst -o q; chmod +x q
./zstd -q -d --long=27 --patch-from=q qn.patch.zst -o qn; chmod +x qn
for b in t_gpu_aq_wg t_gpu_wg; do ./zstd -q -d --long=27 --patch-from=qn $b.patch.zst -o $b; chmod +x $b; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( QVET_AQ_QUICK=1 timeout 300 compute-sanitizer --tool racecheck ./t_gpu_aq_wg ) > $OUT/racecheck-aq-wg.txt 2>&1; echo "racecheck aq_wg rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-g128-f16' timeout 300 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck-wg.txt 2>&1; echo "racecheck wg rc=$?"
( time timeout 300 ./t_gpu_aq_wg ) > $OUT/t_gpu_aq_wg.txt 2>&1; echo "t_gpu_aq_wg rc=$?"
( time QVET_WG_QUICK=1 timeout 200 ./t_gpu_wg ) > $OUT/t_gpu_wg.txt 2>&1; echo "t_gpu_wg rc=$?"
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck-aq-wg.txt $OUT/racecheck-wg.txt
grep -E 'Checks|real' $OUT/t_gpu_aq_wg.txt $OUT/t_gpu_wg.txt
R="cublas-f16,qqq-*,marlin-w4a16-ch-f16,marlin-w8a16-g128-bf16"
for t in 1 2; do for b in q qn; do
  ./$b bench --m 128,1024 --runs 20 --passes 1 --variant "$R" --out b-$b-$t.jsonl > /dev/null 2>&1 || echo "$b bench failed"
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
    print(k[0][:7],k[1],k[2].ljust(26),' '.join(f"{b}={sum(x)/len(x):.1f}" for b,x in sorted(v.items())))
PY

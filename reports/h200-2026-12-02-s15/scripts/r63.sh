#!/bin/bash
# r63: the wgmma weight-only kernel's epilogue through shared memory and
# tensor-map stores. Binaries: q0 = HEAD (651e390), qn = the new epilogue, 64
# tokens per round (default), q32/q128/q256 = 32/128/256 tokens per round;
# t_gpu_wg of qn.
cd .dev
xz -d -c q0.xz > q0; chmod +x q0
for b in qn q32 q128 q256 t_gpu_wg; do ./zstd -q -d --long=27 --patch-from=q0 $b.patch.zst -o $b; chmod +x $b; done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/smi.txt
export PATH=$PATH:/usr/local/cuda/bin
( time QVET_WG_QUICK=1 timeout 300 ./t_gpu_wg ) > $OUT/t_gpu_wg.txt 2>&1; echo "t_gpu_wg quick rc=$?"
tail -n 4 $OUT/t_gpu_wg.txt
for r in marlin-w4a16-ch-f16 marlin-w4a16-g32-bf16 marlin-w4a16-g128-zp-f16 marlin-fp8a16-g128-bf16 marlin-w8a16-ch-f16; do
  ( time QVET_WG_ROWS=$r timeout 200 ./t_gpu_wg ) >> $OUT/t_gpu_wg.txt 2>&1; echo "t_gpu_wg $r rc=$?"
done
grep -E 'Checks|real' $OUT/t_gpu_wg.txt
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-w4a16-ch-f16' timeout 300 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?"
grep -E 'RACECHECK SUMMARY|hazard|checks' $OUT/racecheck.txt | tail -n 4
( QVET_WG_QUICK=1 QVET_WG_ROWS='marlin-fp8a16-g128-bf16' timeout 300 compute-sanitizer --tool memcheck ./t_gpu_wg ) > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"
grep -E 'ERROR SUMMARY|checks' $OUT/memcheck.txt | tail -n 3
R="cublas-f16,marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16,marlin-w8a16-g128-bf16,marlin-w4a16-g32-f16"
for t in 1 2; do for b in q0 qn q32 q128 q256; do
  ./$b bench --m 32,128,256,1024 --runs 20 --passes 1 --variant "$R" --out b-$b-$t.jsonl > /dev/null 2>&1 || echo "$b bench failed"
done; done
cat b-*.jsonl > $OUT/bench.jsonl
python3 - <<'PY'
import json,collections
res=collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(__import__('os').environ['OUT']+'/bench.jsonl'):
    pass
import glob
for f in glob.glob('b-*.jsonl'):
    b=f.split('-')[1]
    for l in open(f):
        d=json.loads(l)
        if d.get('kind')!='bench' or d.get('layer')!='block': continue
        res[(d['model'],d['m'],d['variant'])][b].append(d['median_us'])
B=('q0','qn','q32','q128','q256')
cub={k[:2]:sum(v['q0'])/len(v['q0']) for k,v in res.items() if k[2]=='cublas-f16'}
for k in sorted(res):
    v=res[k]; c=cub[k[:2]]
    print(k[0][:6],k[1],k[2][7:22].ljust(16),' '.join(f"{b}={sum(v[b])/len(v[b]):7.1f}({c/(sum(v[b])/len(v[b])):.2f})" for b in B if b in v))
PY

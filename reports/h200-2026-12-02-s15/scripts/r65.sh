#!/bin/bash
# r65: 8-bit codes in bf16 by two lop3 per register pair (qd) against HEAD
# (q, the pack's base = 7ee1b7f's device code); the M = 9 / 16 wgmma tiles.
set -u
cd .dev
./zstd -q -d -f ../mutants/out/gpu/pack/qvet-base.zst -o q; chmod +x q
for b in qd t_gpu_wg t_gpu_wonly; do ./zstd -q -d --long=27 --patch-from=q $b.patch.zst -o $b; chmod +x $b; done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/smi.txt
R="cublas-f16,marlin-w8a16-ch-bf16,marlin-w8a16-g128-bf16,marlin-w8a16-ch-f16"
for t in 1 2; do for b in q qd; do
  ./$b bench --m 1,4,16,128,1024 --runs 20 --passes 1 --variant "$R" --out b-$b-$t.jsonl > /dev/null 2>&1 || echo "$b bench failed"
done; done
R2="cublas-f16,marlin-w4a16-ch-f16,marlin-fp8a16-ch-f16,marlin-w4a16-g128-f16"
./qd bench --m 9,16 --runs 20 --passes 1 --variant "$R2" --out s-dflt.jsonl > /dev/null 2>&1
QVET_WO_WG_TILE=128x16 ./qd bench --m 9,16 --runs 20 --passes 1 --variant "$R2" --out s-t128.jsonl > /dev/null 2>&1
QVET_WO_WG_MIN_M=9 ./qd bench --m 9,16 --runs 20 --passes 1 --variant "$R2" --out s-wg512.jsonl > /dev/null 2>&1
QVET_WO_WG_MIN_M=9 QVET_WO_WG_TILE=128x16 ./qd bench --m 9,16 --runs 20 --passes 1 --variant "$R2" --out s-wg128.jsonl > /dev/null 2>&1
cat b-*.jsonl s-*.jsonl > $OUT/bench.jsonl
( time QVET_WONLY_ROWS=w8a16 timeout 300 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1 &
( time QVET_WG_ROWS='marlin-w8a16-*' timeout 300 ./t_gpu_wg ) > $OUT/t_gpu_wg.txt 2>&1 &
wait
grep -E 'Checks|real' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt
python3 - <<'PY'
import json,collections,glob
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob('b-*.jsonl')+glob.glob('s-*.jsonl'):
    b=f.split('-')[1].split('.')[0]
    for l in open(f):
        d=json.loads(l)
        if d.get('kind')!='bench' or d.get('layer') is None: continue
        res[(d['model'],d['m'],d['variant'],d['layer'])][b].append(d['median_us'])
for k in sorted(res):
    if k[3]!='block' and not k[0].startswith('llama3'): continue
    v=res[k]
    print(k[0][:7],k[1],k[2][7:24].ljust(18),k[3].ljust(7),' '.join(f"{b}={sum(x)/len(x):.1f}" for b,x in sorted(v.items())))
PY

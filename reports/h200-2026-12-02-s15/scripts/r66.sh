#!/bin/bash
# r66: the block row's BLK128x128 form at M = 128 and from 193 (qn); the QQQ wgmma kernel's epilogue through shared memory and tensor-map
# stores (qn) against the pack's base (q, 72b99ff); its tests, racecheck and
# mutant; the activation quantizer's queued timing behind the sleeping wait.
set -u
cd .dev
./zstd -q -d -f qold.zst -o q; chmod +x q
./zstd -q -d --long=27 --patch-from=q qn.patch.zst -o qn; chmod +x qn
for b in t_gpu_aq_wg t_gpu_wg t_gpu_aq t_gpu_aq_lt_fp8; do ./zstd -q -d --long=27 --patch-from=qn $b.patch.zst -o $b; chmod +x $b; done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/smi.txt
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( time timeout 300 ./t_gpu_aq_wg ) > $OUT/t_gpu_aq_wg.txt 2>&1; echo "t_gpu_aq_wg rc=$?"
( QVET_AQ_QUICK=1 timeout 300 compute-sanitizer --tool racecheck ./t_gpu_aq_wg ) > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?"
( time QVET_WG_QUICK=1 timeout 200 ./t_gpu_wg ) > $OUT/t_gpu_wg.txt 2>&1; echo "t_gpu_wg rc=$?"
( time QVET_AQ_QUICK=1 timeout 200 ./t_gpu_aq ) > $OUT/t_gpu_aq.txt 2>&1; echo "t_gpu_aq rc=$?"
( time timeout 200 ./t_gpu_aq_lt_fp8 ) > $OUT/t_gpu_aq_lt_fp8.txt 2>&1; echo "t_gpu_aq_lt_fp8 rc=$?"
grep -E 'Checks|real' $OUT/t_gpu_aq_wg.txt $OUT/t_gpu_wg.txt $OUT/t_gpu_aq.txt $OUT/t_gpu_aq_lt_fp8.txt
grep -E 'RACECHECK SUMMARY|Checks' $OUT/racecheck.txt
R="cublas-f16,qqq-*,act-quant-*"
for t in 1 2; do for b in q qn; do
  ./$b bench --m 32,128,256,1024 --runs 20 --passes 1 --variant "$R" --out b-$b-$t.jsonl > b-$b-$t.txt 2>&1 || echo "$b bench failed"
done; done
for t in 1 2; do for b in q qn; do
  ./$b bench --m 128,160,192,224,256 --runs 20 --passes 1 --variant 'w8a8-fp8-block128' --out k-$b-$t.jsonl > /dev/null 2>&1 || echo "$b blk bench failed"
done; done
cat b-*.jsonl k-*.jsonl > $OUT/bench.jsonl; cp b-qn-1.txt $OUT/bench-qn-1.txt
cd ..
PATH=$PWD/.dev:$PATH timeout 200 python3 tools/mutants.py --gpu --unpack --run-only --only gpu_qwg_epi_rows_unswizzled > $OUT/mutants.txt 2>&1; echo "mutants rc=$?"
tail -n 3 $OUT/mutants.txt; cp mutants/out/gpu/kill.md $OUT/kill.md 2>/dev/null
cd .dev
python3 - <<'PY'
import json,collections,glob
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob('b-*.jsonl')+glob.glob('k-*.jsonl'):
    b=f.split('-')[1]
    for l in open(f):
        d=json.loads(l)
        if d.get('kind')!='bench' or d.get('layer')!='block': continue
        res[(d['model'],d['m'],d['variant'])][b].append(d['median_us'])
for k in sorted(res):
    v=res[k]
    print(k[0][:7],k[1],k[2].ljust(26),' '.join(f"{b}={sum(x)/len(x):.1f}" for b,x in sorted(v.items())))
PY
grep -A3 'act-quant' b-qn-1.txt | head -12

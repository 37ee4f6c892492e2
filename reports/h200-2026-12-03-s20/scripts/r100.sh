#!/bin/bash
# r100 (planned as r97 the evening before, when no device was lent): tools/probe-perm.cu (act_order's permutation alone, every staged configuration); qn = the
# permutation with one bulk copy per block where a block takes one row (M < 512), the loop of
# 16-byte loads with rows capped so that two blocks share an SM otherwise; q0 = a6a7deb (the same
# wgmma kernel and permutation as b562ec3). t_gpu_wg on the act_order rows (its new
# act_order_permutation test included), racecheck and memcheck on the quick cases, then q0 / qn in
# turns on act rows and their g128 rows, M = 64, 256, 1024.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qn.zst -o qn
./zstd -q -d -f --long=27 --patch-from=qn twg.zst -o t_gpu_wg
chmod +x q0 qn t_gpu_wg probe-perm
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
timeout 120 ./probe-perm > $OUT/probe-perm.txt 2>&1; echo "probe rc=$?"
cat $OUT/probe-perm.txt
( time QVET_WG_ROWS='marlin-w4a16-g128-act-*' timeout 300 ./t_gpu_wg ) > $OUT/t_gpu_wg-act.txt 2>&1; echo "t_gpu_wg rc=$?"
grep -E '^100%|Checks|real|act_order perm|FAIL' $OUT/t_gpu_wg-act.txt | head
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-f16 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-bf16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wg ) > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $OUT/racecheck.txt $OUT/memcheck.txt
V='marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16,marlin-w4a16-g128-f16'
for t in 1 2 3; do for b in q0 qn; do
  timeout 200 ./$b bench --m 64,256,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q0-*.jsonl > $OUT/ab-q0.jsonl; cat qn-*.jsonl > $OUT/ab-qn.jsonl
python3 - <<'PY'
import json,os,collections,statistics as st
O=os.environ['OUT']
def load(f):
    d=collections.defaultdict(list)
    for l in open(f):
        for part in l.strip().split('{"kind"'):
            if not part: continue
            try: r=json.loads('{"kind"'+part)
            except Exception: continue
            if r.get('kind')=='bench' and r.get('layer'): d[(r['variant'],r['model'],r['m'],r['layer'])].append(r['median_us'])
    return d
a=load(f'{O}/ab-q0.jsonl'); b=load(f'{O}/ab-qn.jsonl')
for k in sorted(a):
    if k in b: print(*k, f"q0 {st.mean(a[k]):8.1f} qn {st.mean(b[k]):8.1f} {100*(st.mean(b[k])/st.mean(a[k])-1):+5.1f}%")
PY

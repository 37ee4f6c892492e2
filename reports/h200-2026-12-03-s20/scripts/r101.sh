#!/bin/bash
# r101: tools/probe-perm.cu with the launch rules old, R0 (= qn: b562ec3 + the bulk-copy permutation,
# one row: bulk 1024, else loop 512) R1 and R2, M = 64-1024; q1 = the same with rule R1. t_gpu_wg of
# q1 on the act_order rows, racecheck and memcheck on the quick cases (R1 adds the loop with 1024
# threads); qn / q1 in turns on the act_order rows, M = 64-1024; then paired with cuBLAS at
# M = 1024 (act_order rows and their g128 rows), qn and q1 in turns.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qn.zst -o qn
./zstd -q -d -f --long=27 --patch-from=q0 q1.zst -o q1
./zstd -q -d -f --long=27 --patch-from=q1 t1.zst -o t_gpu_wg
chmod +x q0 qn q1 t_gpu_wg probe-perm
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
timeout 200 ./probe-perm > $OUT/probe-perm.txt 2>&1; echo "probe rc=$?"
grep -E '^[0-9]' $OUT/probe-perm.txt | grep hot
( time QVET_WG_ROWS='marlin-w4a16-g128-act-*' timeout 200 ./t_gpu_wg ) > $OUT/t_gpu_wg-act.txt 2>&1; echo "t_gpu_wg rc=$?"
grep -E '^100%|Checks|real|act_order perm|FAIL' $OUT/t_gpu_wg-act.txt | head
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-f16 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-bf16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wg ) > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $OUT/racecheck.txt $OUT/memcheck.txt
V='marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16'
for t in 1 2 3; do for b in qn q1; do
  timeout 200 ./$b bench --m 64,128,256,512,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat qn-*.jsonl > $OUT/ab-qn.jsonl; cat q1-*.jsonl > $OUT/ab-q1.jsonl
python3 - <<'PY' | tee $OUT/summary.txt
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
a=load(f'{O}/ab-qn.jsonl'); b=load(f'{O}/ab-q1.jsonl')
print('per layer, mean of three turns, us: qn (R0) / q1 (R1)')
for k in sorted(a):
    if k in b and k[0]!='cublas-f16': print(*k, f"qn {st.mean(a[k]):8.1f} q1 {st.mean(b[k]):8.1f} {100*(st.mean(b[k])/st.mean(a[k])-1):+5.1f}%")
PY
V='cublas-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16,marlin-w4a16-g128-f16'
for t in 1 2; do for b in qn q1; do
  timeout 200 ./$b bench --m 1024 --runs 20 --variant "$V" --out $OUT/paired-$b-$t.jsonl > $OUT/paired-$b-$t.txt 2>&1 || echo "paired $b-$t failed"
done; done
grep -HE 'block \(|g128|^cublas' $OUT/paired-*.txt | head -60

# r101, second command (the first one's probe, test and sanitizer outputs were among the files the
# device tool did not bring back, past its count of files): the same binaries, still on the machine.
# cd .dev && export PATH=$PATH:/usr/local/cuda/bin QVET_GOLDEN=$PWD/golden && mkdir -p /tmp/o &&
# (timeout 200 ./probe-perm > /tmp/o/probe-perm.txt 2>&1; echo "probe rc=$?";
#  ( time QVET_WG_ROWS='marlin-w4a16-g128-act-*' timeout 200 ./t_gpu_wg ) > /tmp/o/t_gpu_wg-act.txt 2>&1; echo "t_gpu_wg rc=$?";
#  ( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-f16 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > /tmp/o/racecheck.txt 2>&1;
#  ( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-bf16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wg ) > /tmp/o/memcheck.txt 2>&1;
#  cp qn-*.jsonl q1-*.jsonl /tmp/o/) > /tmp/o/rc.txt; tar -C /tmp -czf $OUT/r101b.tgz o

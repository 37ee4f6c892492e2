#!/bin/bash
# r105: q4 = the act_order permutation in the wgmma kernel's first phase (a grid barrier, a
# cooperative launch), QVET_WO_WG_PERM_FUSED=0 giving q3's kernel in front; t4 = its t_gpu_wg
# (act_order_permutation both ways, the counters area checked zero after each launch). t_gpu_wg
# full (four processes); racecheck / memcheck on the act_order quick cases (fused); fused 0 / 1
# in turns on the act rows, q3 / q4 in turns on g128-f16 and ch-f16 (rows whose kernel code
# changed but not their path); q4 paired at M = 1024. One tar.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 q3.zst -o q3
./zstd -q -d -f --long=27 --patch-from=q0 q4.zst -o q4
./zstd -q -d -f --long=27 --patch-from=q4 t4.zst -o t_gpu_wg
chmod +x q0 q3 q4 t_gpu_wg
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r105; rm -rf $O; mkdir -p $O
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 300 ./t_gpu_wg ) > $O/wg$i.txt 2>&1 &
done
wait
cat $O/wg1.txt $O/wg2.txt $O/wg3.txt $O/wg4.txt > $O/t_gpu_wg.txt; rm $O/wg?.txt
grep -E 'Checks|real|act_order perm' $O/t_gpu_wg.txt
grep -E 'FAIL|failed' $O/t_gpu_wg.txt | grep -v ', 0 failed' | head -20
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-f16 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $O/racecheck.txt 2>&1; echo "racecheck rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-bf16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wg ) > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $O/racecheck.txt $O/memcheck.txt
V='marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16'
for t in 1 2 3 4; do for f in 0 1; do
  QVET_WO_WG_PERM_FUSED=$f timeout 200 ./q4 bench --m 64,256,512,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-f$f-$t.jsonl > /dev/null 2>&1 || echo "f$f-$t failed"
done; done
V='marlin-w4a16-g128-f16,marlin-w4a16-ch-f16'
for t in 1 2; do for b in q3 q4; do
  timeout 200 ./$b bench --m 256,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/nc-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
python3 - <<'PY' | tee $O/summary.txt
import json,glob,collections,statistics as st
def load(files):
    d=collections.defaultdict(list)
    for f in files:
        for l in open(f):
            for part in l.strip().split('{"kind"'):
                if not part: continue
                try: r=json.loads('{"kind"'+part)
                except Exception: continue
                if r.get('kind')=='bench' and r.get('layer') in ('block','qkv','o','gate_up','down') and r['variant']!='cublas-f16':
                    d[(r['variant'],r['model'],r['m'],r['layer'])].append(r['median_us'])
    return d
for title,fa,fb in [('fused 0 -> 1 (q4)','/tmp/r105/ab-f0-*.jsonl','/tmp/r105/ab-f1-*.jsonl'),('q3 -> q4, rows without act_order','/tmp/r105/nc-q3-*.jsonl','/tmp/r105/nc-q4-*.jsonl')]:
    a=load(glob.glob(fa)); b=load(glob.glob(fb)); print(title)
    for k in sorted(a):
        if k in b: print('  ',*k, f"{st.mean(a[k]):8.1f} {st.mean(b[k]):8.1f} {100*(st.mean(b[k])/st.mean(a[k])-1):+5.1f}%")
PY
V='cublas-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16,marlin-w4a16-g128-f16'
for t in 1 2; do
  timeout 200 ./q4 bench --m 1024 --runs 20 --variant "$V" --out $O/paired-q4-$t.jsonl > $O/paired-q4-$t.txt 2>&1 || echo "paired $t failed"
done
grep -hE 'block \(|chained|g128|^cublas' $O/paired-q4-*.txt | head -40
tar -C /tmp -czf $OUT/r105.tgz r105

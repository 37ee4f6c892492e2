#!/bin/bash
# r102: q3 = b562ec3 + the staged permutation under rule R3 (rows = M / 132 rounded up by the loop
# with 1024 threads; past 200 KiB two-per-SM rows by the bulk copy), t3 = its t_gpu_wg (the
# act_order_permutation test with five shapes). probe-perm with R3's column; t_gpu_wg full (four
# processes); racecheck / memcheck on the act_order quick cases; qn (R0) / q3 in turns on the act
# rows, M = 64-1024, four turns; q3 paired with cuBLAS at M = 1024, two turns. Everything in one tar.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qn.zst -o qn
./zstd -q -d -f --long=27 --patch-from=q0 q3.zst -o q3
./zstd -q -d -f --long=27 --patch-from=q3 t3.zst -o t_gpu_wg
chmod +x q0 qn q3 t_gpu_wg probe-perm
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r102; rm -rf $O; mkdir -p $O
timeout 200 ./probe-perm > $O/probe-perm.txt 2>&1; echo "probe rc=$?"
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 300 ./t_gpu_wg ) > $O/wg$i.txt 2>&1 &
done
wait
cat $O/wg1.txt $O/wg2.txt $O/wg3.txt $O/wg4.txt > $O/t_gpu_wg.txt; rm $O/wg?.txt
grep -E 'Checks|real|act_order perm' $O/t_gpu_wg.txt
grep -E 'failed' $O/t_gpu_wg.txt | grep -v ', 0 failed' | head
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-f16 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $O/racecheck.txt 2>&1; echo "racecheck rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-bf16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wg ) > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $O/racecheck.txt $O/memcheck.txt
V='marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16'
for t in 1 2 3 4; do for b in qn q3; do
  timeout 200 ./$b bench --m 64,256,512,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
V='cublas-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16,marlin-w4a16-g128-f16'
for t in 1 2; do
  timeout 200 ./q3 bench --m 1024 --runs 20 --variant "$V" --out $O/paired-q3-$t.jsonl > $O/paired-q3-$t.txt 2>&1 || echo "paired $t failed"
done
grep -hE 'block \(|g128|^cublas' $O/paired-q3-*.txt | head -40
tar -C /tmp -czf $OUT/r102.tgz r102

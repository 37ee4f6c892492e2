#!/bin/bash
# r107: qp = HEAD + the wgmma weight-only kernel's producer fetching its tensor maps ahead of the
# first copies and, behind the act_order permutation (PDL), requesting its first stages' weights
# before griddepcontrol.wait; tp = its t_gpu_wg. q3 = HEAD's device code (e18d088 = 0cf77e3).
# t_gpu_wg full (four processes); racecheck on act-f16 and g128-f16 quick, memcheck on act-bf16
# quick; q3 / qp in turns, --no-pair, act-f16, act-bf16, g128-f16 at M = 64, 256, 1024.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 q3.zst -o q3
./zstd -q -d -f --long=27 --patch-from=q0 qp.zst -o qp
./zstd -q -d -f --long=27 --patch-from=qp tp.zst -o t_gpu_wg
chmod +x q0 q3 qp t_gpu_wg
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r107; rm -rf $O; mkdir -p $O
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 300 ./t_gpu_wg ) > $O/wg$i.txt 2>&1 &
done
wait
cat $O/wg1.txt $O/wg2.txt $O/wg3.txt $O/wg4.txt > $O/t_gpu_wg.txt; rm $O/wg?.txt
grep -E 'Checks|real' $O/t_gpu_wg.txt
grep -E 'failed' $O/t_gpu_wg.txt | grep -v ', 0 failed' | head
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-f16 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $O/racecheck-act.txt 2>&1; echo "racecheck rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-f16 timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wg ) > $O/racecheck-g128.txt 2>&1; echo "racecheck rc=$?"
( QVET_WG_QUICK=1 QVET_WG_ROWS=marlin-w4a16-g128-act-bf16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wg ) > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $O/racecheck-*.txt $O/memcheck.txt
V='marlin-w4a16-g128-act-f16,marlin-w4a16-g128-act-bf16,marlin-w4a16-g128-f16'
for t in 1 2; do for b in q3 qp; do
  timeout 150 ./$b bench --m 64,256,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
tar -C /tmp -czf $OUT/r107.tgz r107

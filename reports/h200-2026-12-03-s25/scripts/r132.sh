#!/bin/bash
# r132: r131 again with qg really built with -DQV_WO_SMALL_G4_FMA=1 (r131's qg had the
# committed kernel): qq / qg in turns, 3 turns; qg's t_gpu_wonly on the w4a16-g rows.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qq qg; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
./zstd -q -d -f --long=27 --patch-from=qg g-t_gpu_wonly.zst -o tests/g-t_gpu_wonly; chmod +x tests/g-t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r132; rm -rf $O; mkdir -p $O
V='marlin-w4a16-g128-f16,marlin-w4a16-g32-f16,marlin-w4a16-g64-f16,marlin-w4a16-ch-f16'
T0=$(date +%s)
for t in 1 2 3; do for b in qq qg; do
  for mdl in llama3-70b llama2-7b; do
    timeout 80 ./$b bench --model $mdl --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done
done; done
echo "bench secs=$(( $(date +%s) - T0 ))" > $O/time.txt
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
QVET_WONLY_ROWS=w4a16-g run g-t_gpu_wonly timeout 330 tests/g-t_gpu_wonly
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -E "Failure|Error|assert" $O/g-t_gpu_wonly.txt | head -20
tar -C /tmp -czf $OUT/r132.tgz r132

#!/bin/bash
# r131: (1) qq (committed kernels) / qg (4-bit group-scale f16 dequant as q*2^-20 x s*2^20 - 8s in
# one HFMA2, measurement build) in turns, 3 turns; (2) the counters-helper test sources (h-) on qq:
# t_gpu_wg by pattern, t_gpu_wonly_chain; qg's t_gpu_wonly on the w4a16-g rows.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qq qg; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
for t in t_gpu_wg t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qq h-$t.zst -o tests/h-$t; chmod +x tests/h-$t; done
./zstd -q -d -f --long=27 --patch-from=qg g-t_gpu_wonly.zst -o tests/g-t_gpu_wonly; chmod +x tests/g-t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r131; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $O/smi.txt 2>&1
V='marlin-w4a16-g128-f16,marlin-w4a16-g32-f16,marlin-w4a16-g64-f16,marlin-w4a16-ch-f16'
T0=$(date +%s)
for t in 1 2 3; do for b in qq qg; do
  for mdl in llama3-70b llama2-7b; do
    timeout 80 ./$b bench --model $mdl --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done
done; done
echo "bench secs=$(( $(date +%s) - T0 ))" > $O/time.txt
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); QVET_WG_ROWS="$pat" run h-t_gpu_wg-$i timeout 400 tests/h-t_gpu_wg &
done
run h-t_gpu_wonly_chain timeout 300 tests/h-t_gpu_wonly_chain &
QVET_WONLY_ROWS=w4a16-g run g-t_gpu_wonly timeout 330 tests/g-t_gpu_wonly &
wait
echo "all secs=$(( $(date +%s) - T0 ))" >> $O/time.txt
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r131.tgz r131

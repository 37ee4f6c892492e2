#!/bin/bash
# r115: HEAD cfc71be (qh/th): t_gpu_wonly in full (four processes by row family), then the
# complete weight-only table paired with cuBLAS fp16 once.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qvet
./zstd -q -d -f --long=27 --patch-from=qvet th.zst -o t_gpu_wonly
chmod +x qvet t_gpu_wonly
export QVET_GOLDEN=$PWD/golden
O=/tmp/r115; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu,power.limit --format=csv > $O/smi.txt 2>&1
for pat in w4a16-g w4a16-ch w8a16 fp8a16; do
  ( start=$(date +%s); QVET_WONLY_ROWS=$pat timeout 200 ./t_gpu_wonly > $O/t_gpu_wonly-$pat.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - start ))" >> $O/t_gpu_wonly-$pat.txt ) &
done
wait
grep -hE '^[0-9]+%|Checks|rc=' $O/t_gpu_wonly-*.txt
( time timeout 200 ./qvet bench --runs 20 --variant 'cublas-f16,marlin-*' --out $O/wo-1.jsonl > $O/wo-1.txt 2>&1 ) 2>> $O/time.txt; echo "wo-1 rc=$?"
cat $O/time.txt
tar -C /tmp -czf $OUT/r115.tgz r115

#!/bin/bash
# r139: (1) tools/probe-ring.cu: the small-M ring alone, copy modes, L2 prefetch, 8 KiB rows;
# (2) qn (HEAD) default against QVET_WO_SMALL=swap2 (1024 columns per block for 4-bit codes)
# in turns, 4-bit rows, M = 1, 4, 8, both models, three turns: per-layer data for a cpw rule.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qn.zst -o qn; chmod +x qn
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r139; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $O/smi.txt
timeout 240 ./probe-ring 40 > $O/probe-ring.txt 2>&1; echo "rc=$?" >> $O/probe-ring.txt
cat $O/probe-ring.txt
V='marlin-w4a16-ch-f16,marlin-w4a16-ch-bf16,marlin-w4a16-g128-f16,marlin-w4a16-g128-bf16,marlin-w4a16-g128-zp-f16,marlin-w4a16-g64-f16,marlin-w4a16-g32-f16,marlin-w4a16-g128-act-f16'
for t in 1 2 3; do for b in def swap2; do
  for mdl in llama3-70b llama2-7b; do
    if [ $b = swap2 ]; then export QVET_WO_SMALL=swap2; else unset QVET_WO_SMALL; fi
    timeout 80 ./qn bench --model $mdl --m 1,4,8 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$b-$mdl-$t failed"
  done
done; done
unset QVET_WO_SMALL
tar -C /tmp -czf $OUT/r139.tgz r139

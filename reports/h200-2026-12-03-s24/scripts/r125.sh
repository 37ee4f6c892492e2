#!/bin/bash
# r125: qq (HEAD's kernels): the small-M plans the cost model picks (TRACE) and forced K slices x
# cluster caps, Llama-3-70B, M = 1, 4, 8, 16, two rows: is there a faster plan per layer?
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qq.zst -o qq; chmod +x qq
export QVET_GOLDEN=$PWD/golden
O=/tmp/r125; rm -rf $O; mkdir -p $O
V='marlin-fp8a16-ch-f16,marlin-w4a16-ch-f16'
T0=$(date +%s)
QVET_WO_SMALL_TRACE=1 timeout 60 ./qq bench --model llama3-70b --m 1,4,8,16 --runs 2 --passes 1 --no-pair --variant "$V" 2> $O/trace.txt > /dev/null
sort $O/trace.txt | uniq -c > $O/trace-u.txt
timeout 60 ./qq bench --model llama3-70b --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/def-1.jsonl > /dev/null 2>&1 || echo "def failed"
for c in 8 16 4 2 1; do
  for s in 2 4 8 12 16 24 32 48 64 3 6; do
    [ $(( $(date +%s) - T0 )) -gt 470 ] && break 2
    QVET_WO_SMALL_SPLITS=$s QVET_WO_SMALL_CLUSTER=$c timeout 40 ./qq bench --model llama3-70b --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/s$s-c$c.jsonl > /dev/null 2>&1 || echo "fail s$s c$c"
  done
done
timeout 60 ./qq bench --model llama3-70b --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/def-2.jsonl > /dev/null 2>&1 || echo "def2 failed"
echo "secs=$(( $(date +%s) - T0 ))" > $O/time.txt
tar -C /tmp -czf $OUT/r125.tgz r125

#!/bin/bash
# r117: Llama-3-70B at M = 8 and 16, forced K slices x cluster caps with A streamed (qa), to see what
# the o and down layers (N = 8192) cost under each split-K shape; qh and qa defaults as references.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qh
./zstd -q -d -f --long=27 --patch-from=q0 qa.zst -o qa
chmod +x qh qa
export QVET_GOLDEN=$PWD/golden
O=/tmp/r117; rm -rf $O; mkdir -p $O
V='marlin-fp8a16-ch-f16,marlin-w4a16-ch-f16'
for t in 1 2; do
  ./qh bench --model llama3-70b --m 8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/def-qh-$t.jsonl > /dev/null 2>&1 || echo fail
  ./qa bench --model llama3-70b --m 8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/def-qa-$t.jsonl > /dev/null 2>&1 || echo fail
  for sc in 8:8 16:2 16:4 16:8 16:16 32:2 32:4 32:8 12:4 24:8 20:4 28:4 64:8; do
    s=${sc%:*}; c=${sc#*:}
    QVET_WO_SMALL_A=stream QVET_WO_SMALL_SPLITS=$s QVET_WO_SMALL_CLUSTER=$c ./qa bench --model llama3-70b --m 8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/s$s-c$c-$t.jsonl > /dev/null 2>&1 || echo "fail $sc"
  done
done
tar -C /tmp -czf $OUT/r117.tgz r117

#!/bin/bash
# r126: qq (HEAD's kernels). (1) wgmma tile x stream-K at M = 512, 1024 on both models (the act_order
# rows' 0.9x). (2) small-M forced K slices x cluster caps on Llama-2-7B (two rows) and on Llama-3-70B
# w4a16-g128-f16, M = 1, 4, 8, 16, with the default twice (the cost model's misses).
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qq.zst -o qq; chmod +x qq
export QVET_GOLDEN=$PWD/golden
O=/tmp/r126; rm -rf $O; mkdir -p $O
T0=$(date +%s)
W='marlin-w4a16-g128-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-ch-f16,marlin-fp8a16-ch-f16'
for t in 1 2; do
  timeout 60 ./qq bench --m 512,1024 --runs 20 --passes 1 --no-pair --variant "$W" --out $O/wg-def-$t.jsonl > /dev/null 2>&1 || echo "wg def failed"
  for tile in 128x256 256x128 128x128; do for sk in 0 1; do
    QVET_WO_WG_TILE=$tile QVET_WO_WG_STREAMK=$sk timeout 60 ./qq bench --m 512,1024 --runs 20 --passes 1 --no-pair --variant "$W" --out $O/wg-$tile-sk$sk-$t.jsonl > /dev/null 2>&1 || echo "wg $tile $sk failed"
  done; done
done
echo "wg secs=$(( $(date +%s) - T0 ))" >> $O/time.txt
run_s() { # model variants tag
  timeout 60 ./qq bench --model $1 --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$2" --out $O/$3-def-1.jsonl > /dev/null 2>&1
  for c in 8 16 4 2 1; do for s in 2 4 8 12 16 24 32 48 64 3 6; do
    [ $(( $(date +%s) - T0 )) -gt 500 ] && break 2
    QVET_WO_SMALL_SPLITS=$s QVET_WO_SMALL_CLUSTER=$c timeout 40 ./qq bench --model $1 --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$2" --out $O/$3-s$s-c$c.jsonl > /dev/null 2>&1 || echo "fail $3 s$s c$c"
  done; done
  timeout 60 ./qq bench --model $1 --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$2" --out $O/$3-def-2.jsonl > /dev/null 2>&1
}
run_s llama2-7b 'marlin-fp8a16-ch-f16,marlin-w4a16-ch-f16,marlin-w4a16-g128-f16' l7
run_s llama3-70b 'marlin-w4a16-g128-f16,marlin-fp8a16-g128-f16' l70g
echo "secs=$(( $(date +%s) - T0 ))" >> $O/time.txt
tar -C /tmp -czf $OUT/r126.tgz r126

#!/bin/bash
# r76: q0 = r73's build (the kernel of HEAD); q1 = the stage's descriptor as a 32-bit low word;
# q2 = q1 with three wgmma groups in flight; q3 = q1 with the next stage's words read ahead
mkdir -p /tmp/q; xz -dc .dev/qvet.xz > /tmp/q/q0; for v in 1 2 3; do ./.dev/zstd -q -d --long=27 --patch-from=/tmp/q/q0 .dev/q$v.zst -o /tmp/q/q$v; done; chmod +x /tmp/q/*
V='marlin-w4a16-ch-f16,marlin-w4a16-g32-f16,marlin-w4a16-g128-f16,marlin-w4a16-g128-zp-f16,marlin-w8a16-g128-bf16,marlin-fp8a16-g128-bf16'
for t in 1 2; do for q in q0 q1 q2 q3; do
  /tmp/q/$q bench --m 256,1024 --runs 20 --passes 1 --variant "$V" --out $OUT/$q-$t.jsonl > /tmp/$q-$t.txt 2>&1 || echo "$q-$t rc=$?"
done; done

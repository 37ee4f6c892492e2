#!/bin/bash
# r111: HEAD (qh): the wgmma weight-only kernel's tile and stream-K tail at M = 512 and 1024,
# paired with cuBLAS fp16, two turns: default (128x256, stream-K tail), 256x128, 128x128,
# QVET_WO_WG_STREAMK=0.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qh.zst -o qvet; chmod +x qvet
O=/tmp/r111; rm -rf $O; mkdir -p $O
V='cublas-f16,marlin-w4a16-g128-f16,marlin-w4a16-g128-act-f16,marlin-w4a16-ch-f16,marlin-fp8a16-ch-f16'
for t in 1 2; do
  for c in def t256x128 t128x128 sk0; do
    case $c in
      def) E="";; t256x128) E="QVET_WO_WG_TILE=256x128";; t128x128) E="QVET_WO_WG_TILE=128x128";; sk0) E="QVET_WO_WG_STREAMK=0";;
    esac
    env $E timeout 100 ./qvet bench --m 512,1024 --runs 20 --variant "$V" --out $O/ab-$c-$t.jsonl > $O/ab-$c-$t.txt 2>&1 || echo "$c-$t failed"
  done
done
tar -C /tmp -czf $OUT/r111.tgz r111

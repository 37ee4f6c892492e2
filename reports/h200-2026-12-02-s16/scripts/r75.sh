#!/bin/bash
# r75: per-instruction stall samples of the wgmma weight-only kernel, Llama-2-7B qkv M = 1024
mkdir -p /tmp/q; xz -dc .dev/qvet.xz > /tmp/q/qvet; chmod +x /tmp/q/*; Q=/tmp/q/qvet
NCU=/usr/local/cuda/bin/ncu
for V in marlin-w4a16-ch-f16 marlin-fp8a16-g128-bf16; do
  $NCU --clock-control none -k regex:k_gemm_wonly_wgmma --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats -o /tmp/rep_$V \
    $Q bench --model llama2-7b --m 1024 --runs 1 --passes 1 --no-pair --variant $V > /tmp/ncu_$V.log 2>&1
  $NCU -i /tmp/rep_$V.ncu-rep --page source --csv --print-source sass > $OUT/src_$V.csv 2> $OUT/src_$V.err
done

#!/bin/bash
# r127: ncu on qq's small-M kernel, Llama-3-70B M = 1, w4a16-g128-f16 (default plan and 8 slices)
# against w4a16-ch-f16: where the g128 row's extra 25 % on gate_up goes.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qq.zst -o qq; chmod +x qq
export QVET_GOLDEN=$PWD/golden
NCU=/usr/local/cuda/bin/ncu
O=/tmp/r127; rm -rf $O; mkdir -p $O
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters"
for V in g128 ch g128s8; do
  case $V in g128) R=marlin-w4a16-g128-f16; E="";; ch) R=marlin-w4a16-ch-f16; E="";; g128s8) R=marlin-w4a16-g128-f16; E="QVET_WO_SMALL_SPLITS=8";; esac
  env $E timeout 150 $NCU $S -k regex:k_gemm_wonly_small --csv --page details ./qq bench --model llama3-70b --m 1 --runs 1 --passes 1 --no-pair --variant $R > $O/ncu-$V.csv 2> $O/ncu-$V.err
  echo "$V rc=$?"
done
tar -C /tmp -czf $OUT/r127.tgz r127

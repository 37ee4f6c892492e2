#!/bin/bash
# r74: ncu on the wgmma weight-only kernel at Llama-2-7B qkv, M = 1024, for the slow grouped rows
mkdir -p /tmp/q; xz -dc .dev/qvet.xz > /tmp/q/qvet; chmod +x /tmp/q/*; Q=/tmp/q/qvet
NCU=/usr/local/cuda/bin/ncu
for V in marlin-w4a16-ch-f16 marlin-w4a16-g128-f16 marlin-w4a16-g32-f16 marlin-w4a16-g128-zp-f16 marlin-w4a16-g128-zp-bf16 marlin-w8a16-g128-bf16 marlin-fp8a16-g128-bf16; do
  $NCU --clock-control none -k regex:k_gemm_wonly_wgmma --launch-skip 2 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active' \
    $Q bench --model llama2-7b --m 1024 --runs 1 --passes 1 --no-pair --variant $V > /tmp/ncu_$V.txt 2>&1
done
cat /tmp/ncu_*.txt > $OUT/ncu.txt

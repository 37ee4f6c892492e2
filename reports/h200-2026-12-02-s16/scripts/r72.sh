#!/bin/bash
# r72: where the M = 1024 variance and time go (Llama-2-7B)
mkdir -p /tmp/q; xz -dc .dev/qvet.xz > /tmp/q/qvet; chmod +x /tmp/q/qvet; Q=/tmp/q/qvet
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
echo "ncu: $NCU"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 50 > $OUT/smi.csv &
SMI=$!
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-zp-f16,marlin-w4a16-g128-zp-bf16'
QVET_BENCH_TRACE=1 $Q bench --model llama2-7b --m 1024 --runs 50 --passes 8 --variant "$V" --out $OUT/a.jsonl > $OUT/a.txt 2> $OUT/a.trace
QVET_WO_WG_TILE=256x128 QVET_BENCH_TRACE=1 $Q bench --model llama2-7b --m 1024 --runs 50 --passes 4 --variant "$V" > $OUT/b.txt 2> $OUT/b.trace
kill $SMI
for L in 5 17; do
  $NCU --clock-control none -k regex:nvjet --launch-skip $L --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --metrics sm__cycles_elapsed.avg.per_second,lts__t_sectors_op_read.sum,lts__t_bytes.sum $Q bench --model llama2-7b --m 1024 --runs 1 --passes 1 --variant marlin-w4a16-ch-f16 > /tmp/ncu_c$L.txt 2>&1
  $NCU --clock-control none -k regex:k_gemm_wonly_wgmma --launch-skip $L --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --metrics sm__cycles_elapsed.avg.per_second,lts__t_sectors_op_read.sum,lts__t_bytes.sum $Q bench --model llama2-7b --m 1024 --runs 1 --passes 1 --variant marlin-w4a16-ch-f16 > /tmp/ncu_w$L.txt 2>&1
done
cat /tmp/ncu_*.txt > $OUT/ncu.txt

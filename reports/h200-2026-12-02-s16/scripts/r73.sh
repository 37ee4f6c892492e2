#!/bin/bash
# r73: the paired benchmark (cuBLAS fp16 side by side with each row), then the same --no-pair
mkdir -p /tmp/q; xz -dc .dev/qvet.xz > /tmp/q/qvet; xz -dc .dev/t_bench_cli.xz > /tmp/q/t_bench_cli; chmod +x /tmp/q/*; Q=/tmp/q/qvet
QVET_BIN=$Q /tmp/q/t_bench_cli > $OUT/t_bench_cli.txt 2>&1; echo "t_bench_cli rc=$?"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $OUT/smi.csv &
SMI=$!
QVET_BENCH_TRACE=1 $Q bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2> $OUT/wo.trace
QVET_BENCH_TRACE=1 $Q bench --runs 20 --no-pair --variant 'cublas-f16,marlin-*' --out $OUT/np.jsonl > $OUT/np.txt 2> $OUT/np.trace
kill $SMI

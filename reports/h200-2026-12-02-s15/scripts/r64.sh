#!/bin/bash
# r64 (72b99ff): the two epilogue mutants, the GPU suites of the weight-only
# family and the benchmark of every weight-only row.
set -u
cd .dev
./zstd -q -d -f ../mutants/out/gpu/pack/qvet-base.zst -o q; chmod +x q
for b in t_gpu_wg t_gpu_wonly; do ./zstd -q -d --long=27 --patch-from=q $b.patch.zst -o $b; chmod +x $b; done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv > $OUT/smi.txt
cd ..
PATH=$PWD/.dev:$PATH timeout 240 python3 tools/mutants.py --gpu --unpack --run-only --only gpu_wg_epi_swizzle_missing,gpu_wg_epi_no_read_wait > $OUT/mutants.txt 2>&1; echo "mutants rc=$?"
tail -n 4 $OUT/mutants.txt
cp mutants/out/gpu/kill.md $OUT/kill.md 2>/dev/null
cd .dev
./q bench --runs 20 --variant 'cublas-f16,marlin-*' --out $OUT/wo.jsonl > $OUT/wo.txt 2>&1; echo "bench rc=$?"
# Correctness after the timings, side by side (the GPU shared; no timing here).
( time timeout 300 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1 &
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); ( time QVET_WG_ROWS="$pat" timeout 300 ./t_gpu_wg ) > wg$i.txt 2>&1 &
done
wait
cat wg1.txt wg2.txt wg3.txt wg4.txt > $OUT/t_gpu_wg.txt
grep -E 'Checks|real' $OUT/t_gpu_wonly.txt $OUT/t_gpu_wg.txt

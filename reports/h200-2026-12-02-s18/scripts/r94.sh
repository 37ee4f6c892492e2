#!/bin/bash
# r94: qs3 = the epilogue's channel scales staged by cp.async with A (a tensor scale read by warp 1),
# the split-K ticket taken as the last stage begins, and the last-warp refill ordered by an "empty"
# mbarrier on which every thread arrives; q0 = a6a7deb's device code. racecheck on the split-K
# cluster cases (ring refills) of three rows, memcheck on one, t_gpu_wonly (full); q0 / qs3 in
# turns, M = 1, 4, 16, eight rows.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qs3.zst -o qs3
./zstd -q -d -f --long=27 --patch-from=qs3 t_gpu_wonly.zst -o t_gpu_wonly
chmod +x q0 qs3 t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
for r in marlin-fp8a16-ch-bf16 marlin-w8a16-ch-f16 marlin-w4a16-g128-zp-f16; do
  ( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS="$r" timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wonly ) > $OUT/racecheck-$r.txt 2>&1; echo "racecheck $r rc=$?"
done
( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-fp8a16-tensor-f16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wonly ) > $OUT/memcheck-tensor.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $OUT/racecheck-*.txt $OUT/memcheck-*.txt
( time timeout 300 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1; echo "t_gpu_wonly rc=$?"
grep -E '^100%|Checks|real' $OUT/t_gpu_wonly.txt | head -3
V='marlin-w4a16-ch-f16,marlin-w4a16-ch-bf16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16,marlin-fp8a16-tensor-bf16,marlin-w8a16-ch-f16,marlin-w8a16-g128-f16,marlin-fp8a16-g128-bf16'
for t in 1 2 3; do for b in q0 qs3; do
  timeout 200 ./$b bench --m 1,4,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q0-*.jsonl qs3-*.jsonl > $OUT/ab.jsonl
# (then a table of the two builds' block means, printed to the run's output)

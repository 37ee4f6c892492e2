#!/bin/bash
# r92: qs = the epilogue scales staged at block start and the split-K ticket taken as the last
# stage begins (kernels/wonly_small.cu); q0 = a6a7deb's device code. t_gpu_wonly (full) of qs,
# racecheck and memcheck on its split-K cluster cases; q0 / qs in turns, M = 1, 4, 16.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qs.zst -o qs
./zstd -q -d -f --long=27 --patch-from=qs t_gpu_wonly.zst -o t_gpu_wonly
chmod +x q0 qs t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
( time timeout 300 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1; echo "t_gpu_wonly rc=$?"
grep -E 'Checks|real|FAIL' $OUT/t_gpu_wonly.txt | head
for r in marlin-w4a16-ch-f16 marlin-fp8a16-ch-bf16; do
  ( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS="$r" timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wonly ) > $OUT/racecheck-$r.txt 2>&1; echo "racecheck $r rc=$?"
done
( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w8a16-ch-f16 timeout 150 compute-sanitizer --tool memcheck ./t_gpu_wonly ) > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"
grep -E 'SUMMARY|Checks' $OUT/racecheck-*.txt $OUT/memcheck.txt
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16,marlin-fp8a16-tensor-bf16,marlin-w8a16-g128-f16'
for t in 1 2 3; do for b in q0 qs; do
  timeout 200 ./$b bench --m 1,4,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q0-*.jsonl qs-*.jsonl > $OUT/ab.jsonl
# (then a per-layer table of the two builds' means, printed to the run's output)

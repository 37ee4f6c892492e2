#!/bin/bash
# r93: qs2 = qs (r92) with the last-warp refill ordered by an "empty" mbarrier per slot (lane 0
# of each warp arrives after __syncwarp, the refilling warp waits for the phase). racecheck on the
# split-K cluster cases (ring refills) of two last-refill rows and one barrier row, t_gpu_wonly
# (full); q0 / qs / qs2 in turns, M = 1, 4, 16.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qs.zst -o qs
./zstd -q -d -f --long=27 --patch-from=q0 qs2.zst -o qs2
./zstd -q -d -f --long=27 --patch-from=qs2 t_gpu_wonly.zst -o t_gpu_wonly
chmod +x q0 qs qs2 t_gpu_wonly
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
for r in marlin-fp8a16-ch-bf16 marlin-w8a16-ch-f16 marlin-w4a16-g128-f16; do
  ( QVET_WONLY_QUICK=2 QVET_WONLY_ROWS="$r" timeout 150 compute-sanitizer --tool racecheck ./t_gpu_wonly ) > $OUT/racecheck-$r.txt 2>&1; echo "racecheck $r rc=$?"
done
grep -E 'SUMMARY|Checks' $OUT/racecheck-*.txt
( time timeout 300 ./t_gpu_wonly ) > $OUT/t_gpu_wonly.txt 2>&1; echo "t_gpu_wonly rc=$?"
grep -E '^100%|Checks|real' $OUT/t_gpu_wonly.txt | head -3
V='marlin-w4a16-ch-f16,marlin-fp8a16-ch-f16,marlin-fp8a16-tensor-bf16,marlin-w8a16-ch-f16'
for t in 1 2 3; do for b in q0 qs qs2; do
  timeout 200 ./$b bench --m 1,4,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
cat q0-*.jsonl qs-*.jsonl qs2-*.jsonl > $OUT/ab.jsonl
# (then a table of the three builds' block means, printed to the run's output)

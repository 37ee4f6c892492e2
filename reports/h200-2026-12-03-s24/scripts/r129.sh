#!/bin/bash
# r129: qr = HEAD + per-warp rings in the small-M kernel (every warp streams and refills its own
# chunks of each stage, no block barrier in the K loop). A/B qq / qr in turns (3 turns, both models,
# M = 1, 4, 8, 16, six rows), then qr's t_gpu_wonly by family, t_gpu_wonly_chain, racecheck on the
# split-K cases of two rows and memcheck on one.
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qq qr; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
for t in t_gpu_wonly t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qr r-$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r129; rm -rf $O; mkdir -p $O
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-w4a16-g128-zp-bf16,marlin-w4a16-g128-act-f16,marlin-fp8a16-ch-f16,marlin-fp8a16-g128-bf16'
for t in 1 2 3; do for b in qq qr; do
  timeout 80 ./$b bench --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for pat in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$pat run t_gpu_wonly-$pat timeout 330 tests/t_gpu_wonly & done
run t_gpu_wonly_chain timeout 200 tests/t_gpu_wonly_chain &
( for r in w4a16-ch-f16 fp8a16-g128-bf16; do QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-$r run racecheck-$r timeout 300 compute-sanitizer --tool racecheck tests/t_gpu_wonly; done
  QVET_WONLY_QUICK=2 QVET_WONLY_ROWS=marlin-w8a16-g128-f16 run memcheck-w8a16-g128-f16 timeout 300 compute-sanitizer --tool memcheck tests/t_gpu_wonly ) &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks|RACECHECK SUMMARY|ERROR SUMMARY' $f | tail -2 | tr '\n' ' ') $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r129.tgz r129

#!/bin/bash
# r145: HEAD's t_gpu_wonly, QVET_WONLY_QUICK=4: the default's two chunks per warp on Llama-3-70B gate_up
# at M = 1 (one row per two-chunk kernel family), the exact probe bit for bit against the CPU model.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qf.zst -o qvet; chmod +x qvet
mkdir -p tests; ./zstd -q -d -f --long=27 --patch-from=qvet g-t_gpu_wonly.zst -o tests/g-t_gpu_wonly; chmod +x tests/g-t_gpu_wonly
export QVET_GOLDEN=$PWD/golden
O=/tmp/r145; rm -rf $O; mkdir -p $O
run() { local name=$1; shift; ( start=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - start ))" >> $O/$name.txt ) }
for r in marlin-w4a16-ch-f16 marlin-w4a16-g128-f16 marlin-w8a16-ch-bf16 marlin-fp8a16-g128-bf16; do
  QVET_WONLY_QUICK=4 QVET_WONLY_ROWS=$r run $r timeout 230 tests/g-t_gpu_wonly &
done
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E 'two chunks per warp' $f | tail -1) $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "FAIL" $O/*.txt | head -5 | cut -c1-250
tar -C /tmp -czf $OUT/r145.tgz r145

#!/bin/bash
# r120: qp = HEAD + programmatic dependent launch of the small-M and wgmma weight-only kernels
# (small-M: L2 prefetch of the first weight stages and scales before griddepcontrol.wait).
# t_gpu_wonly_chain (new) in full; its no-wait build (tcnw, expected to FAIL) on two rows;
# t_gpu_wonly by family; t_gpu_wg by row pattern; racecheck / memcheck on the chain suite.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qp.zst -o qp; chmod +x qp
mkdir -p tests
for t in t_gpu_wonly t_gpu_wg t_gpu_wonly_chain tcnw; do ./zstd -q -d -f --long=27 --patch-from=qp $t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r120; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
run chain timeout 300 tests/t_gpu_wonly_chain
for r in w4a16-ch-f16 fp8a16-g128-bf16; do QVET_WONLY_ROWS=marlin-$r run nowait-$r timeout 60 tests/tcnw; done
for pat in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$pat run t_gpu_wonly-$pat timeout 300 tests/t_gpu_wonly & done
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); QVET_WG_ROWS="$pat" run t_gpu_wg-$i timeout 480 tests/t_gpu_wg &
done
for r in marlin-w4a16-g128-act-f16 marlin-fp8a16-ch-bf16; do
  QVET_WONLY_ROWS=$r run racecheck-$r timeout 480 compute-sanitizer --tool racecheck tests/t_gpu_wonly_chain &
done
QVET_WONLY_ROWS=marlin-w4a16-g128-zp-bf16 run memcheck timeout 480 compute-sanitizer --tool memcheck tests/t_gpu_wonly_chain &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks|ERROR SUMMARY|RACECHECK SUMMARY' $f | tail -2 | tr '\n' ' ') $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r120.tgz r120

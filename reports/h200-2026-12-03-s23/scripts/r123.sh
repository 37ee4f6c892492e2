#!/bin/bash
# r123: qq (the committed kernels): t_gpu_wonly by family, t_gpu_wg by row pattern, t_gpu_aq_chain,
# t_gpu_wonly_chain, side by side.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qq.zst -o qq; chmod +x qq
mkdir -p tests
for t in t_gpu_wonly t_gpu_wg t_gpu_aq_chain t_gpu_wonly_chain; do ./zstd -q -d -f --long=27 --patch-from=qq q-$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r123; rm -rf $O; mkdir -p $O
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for pat in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$pat run t_gpu_wonly-$pat timeout 300 tests/t_gpu_wonly & done
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); QVET_WG_ROWS="$pat" run t_gpu_wg-$i timeout 400 tests/t_gpu_wg &
done
( run t_gpu_aq_chain timeout 200 tests/t_gpu_aq_chain; run t_gpu_wonly_chain timeout 200 tests/t_gpu_wonly_chain ) &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r123.tgz r123

#!/bin/bash
# r130: qf = the committed build (HEAD + wg_params.pdl gone + the test helpers): the suites that
# run the weight-only kernels, side by side; then qq / qf in turns on the wgmma rows (2 turns).
set -u
cd .dev
xz -dc qvet.xz > q0
for b in qq qf; do ./zstd -q -d -f --long=27 --patch-from=q0 $b.zst -o $b; chmod +x $b; done
mkdir -p tests
for t in t_gpu_wonly t_gpu_wg t_gpu_aq_chain t_gpu_wonly_chain t_gpu_ws; do ./zstd -q -d -f --long=27 --patch-from=qf f-$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r130; rm -rf $O; mkdir -p $O
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-act-f16,marlin-fp8a16-ch-f16'
for t in 1 2; do for b in qq qf; do
  timeout 80 ./$b bench --m 32,256,1024 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$b-$t.jsonl > /dev/null 2>&1 || echo "$b-$t failed"
done; done
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for pat in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$pat run t_gpu_wonly-$pat timeout 330 tests/t_gpu_wonly & done
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); QVET_WG_ROWS="$pat" run t_gpu_wg-$i timeout 400 tests/t_gpu_wg &
done
( run t_gpu_aq_chain timeout 200 tests/t_gpu_aq_chain; run t_gpu_wonly_chain timeout 200 tests/t_gpu_wonly_chain; run t_gpu_ws timeout 200 tests/t_gpu_ws ) &
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r130.tgz r130

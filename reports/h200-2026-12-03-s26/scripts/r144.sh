#!/bin/bash
# r144: the committed tree built from a clean clone (the CI run's build): every suite that uses the GPU,
# side by side (t_gpu_wonly by family, t_gpu_wg by row pattern), and the README's benchmark at M = 1, 4, 16.
set -u
cd .dev
xz -dc qvet.xz > q0; ./zstd -q -d -f --long=27 --patch-from=q0 qf.zst -o qvet; chmod +x qvet
mkdir -p tests
for z in tf/*.zst; do b=$(basename $z .zst); ./zstd -q -d -f --long=27 --patch-from=qvet $z -o tests/$b; chmod +x tests/$b; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden QVET_BIN=$PWD/qvet
O=/tmp/r144; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
run() { local name=$1; shift; ( start=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - start ))" >> $O/$name.txt ) }
for f in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$f run t_gpu_wonly-$f timeout 400 tests/t_gpu_wonly & done
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); QVET_WG_ROWS="$pat" run t_gpu_wg-$i timeout 400 tests/t_gpu_wg &
done
( for t in t_gpu_aq t_gpu_aq_chain t_gpu_aq_lt t_gpu_aq_wg t_gpu_ppl t_bench_cli t_campaign; do run $t timeout 300 tests/$t; done ) &
( for t in t_gpu_ws t_gpu_aq_lt_fp8 t_gpu_campaign t_gpu_wonly_chain; do run $t timeout 300 tests/$t; done ) &
wait
for f in $O/t_*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "^FAIL\|:F:" $O/t_*.txt | head -5 | cut -c1-250
tar -C /tmp -czf $OUT/r144.tgz r144

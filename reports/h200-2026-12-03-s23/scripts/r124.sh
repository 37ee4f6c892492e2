#!/bin/bash
# r124: qq (the committed kernels): the other suites that run the weight-only kernels.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 qq.zst -o qq; chmod +x qq
mkdir -p tests
for t in t_gpu_ppl t_bench_cli t_campaign t_gpu_campaign; do ./zstd -q -d -f --long=27 --patch-from=qq q-$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden QVET_BIN=$PWD/qq
O=/tmp/r124; rm -rf $O; mkdir -p $O
run() { local name=$1; shift; local s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt; }
for t in t_gpu_ppl t_bench_cli t_campaign t_gpu_campaign; do run $t timeout 400 tests/$t & done
wait
for f in $O/*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
tar -C /tmp -czf $OUT/r124.tgz r124

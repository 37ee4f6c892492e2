# r47: QQQ wgmma kernel as a programmatic dependent (uncommitted on 30c149f); chain test with both
# split-K sums; A/B QVET_AQ_WG_PDL=0 / default; the four aq split-K mutants (pack built at 30c149f).
# Binaries: zstd patches against the mutant pack's unmutated qvet.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build/tests /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet-pdl.patch.zst -o build/qvet
for t in t_gpu_aq_chain t_gpu_aq_wg; do $Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/$t.patch.zst -o build/tests/$t; done
chmod +x build/qvet build/tests/*
export QVET_GOLDEN=$R/.dev/golden
pack() { cp -r mutants/out/gpu/kill.* res/ 2>/dev/null; tar cf $OUT/r47.tar res; }
trap pack EXIT
( timeout 100 ./build/tests/t_gpu_aq_chain > res/t_gpu_aq_chain.log 2>&1; echo "chain rc=$?" >> res/t_gpu_aq_chain.log ) &
( QVET_AQ_QUICK=1 timeout 150 ./build/tests/t_gpu_aq_wg > res/t_gpu_aq_wg.log 2>&1; echo "t_gpu_aq_wg quick rc=$?" >> res/t_gpu_aq_wg.log ) &
wait
grep -E "^[0-9]+%|rc=|FAIL" res/t_gpu_aq_chain.log res/t_gpu_aq_wg.log
for turn in 1 2; do
  for b in nopdl pdl; do
    env=X=1; [ $b = nopdl ] && env=QVET_AQ_WG_PDL=0
    env $env timeout 100 ./build/qvet bench --m 1,16,24,32,64,128,1024 --runs 20 --variant 'cublas-f16,qqq-*' --out res/ab-$b-$turn.jsonl > res/ab-$b-$turn.txt 2>&1
    echo "bench $b $turn rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt
( time timeout 300 python3 tools/mutants.py --gpu --unpack --run-only --only gpu_aq_cluster_missing_barrier,gpu_aq_lock_not_reset,gpu_aq_split_sum_not_zeroed,gpu_aq_splitk_f16_reduce ) > res/mutants.log 2>&1
tail -15 res/mutants.log

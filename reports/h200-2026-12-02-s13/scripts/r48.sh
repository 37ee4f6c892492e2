# r48: the QQQ wgmma kernel dependent launch up to M = 128 (final rule); chain and t_gpu_aq_wg quick;
# the two e4m3 split-K mutants with QVET_AQ_LT_FP8_MIN_M=off (pack built at 30c149f).
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
pack() { cp -r mutants/out/gpu/kill.* res/ 2>/dev/null; tar cf $OUT/r48.tar res; }
trap pack EXIT
( timeout 100 ./build/tests/t_gpu_aq_chain > res/t_gpu_aq_chain.log 2>&1; echo "chain rc=$?" >> res/t_gpu_aq_chain.log ) &
( QVET_AQ_QUICK=1 timeout 150 ./build/tests/t_gpu_aq_wg > res/t_gpu_aq_wg.log 2>&1; echo "t_gpu_aq_wg quick rc=$?" >> res/t_gpu_aq_wg.log ) &
wait
grep -E "^[0-9]+%|rc=|FAIL" res/t_gpu_aq_chain.log res/t_gpu_aq_wg.log
( time timeout 300 python3 tools/mutants.py --gpu --unpack --run-only --only gpu_aq_lock_not_reset,gpu_aq_splitk_f16_reduce ) > res/mutants.log 2>&1
tail -15 res/mutants.log

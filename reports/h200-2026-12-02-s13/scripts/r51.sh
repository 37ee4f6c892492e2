# r51: HEAD 7a268d0: full t_gpu_wonly alone on the GPU (asked for by the twelfth session's note), then the two
# gpu_wo_small_ mutants whose switches moved into kernels/wonly_small_tile.cuh (pack built at 7a268d0).
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build/tests /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/t_gpu_wonly.patch.zst -o build/tests/t_gpu_wonly
chmod +x build/tests/*
export QVET_GOLDEN=$R/.dev/golden
pack() { cp -r mutants/out/gpu/kill.* res/ 2>/dev/null; tar cf $OUT/r51.tar res; }
trap pack EXIT
( time timeout 200 ./build/tests/t_gpu_wonly ) > res/t_gpu_wonly.log 2>&1; echo "t_gpu_wonly rc=$?" >> res/t_gpu_wonly.log
grep -E "^[0-9]+%|rc=|FAIL|^real" res/t_gpu_wonly.log | head
( time timeout 100 python3 tools/mutants.py --gpu --unpack --run-only --only gpu_wo_small_splitk_f16_reduce,gpu_wo_small_scale_perm ) > res/mutants.log 2>&1
tail -8 res/mutants.log

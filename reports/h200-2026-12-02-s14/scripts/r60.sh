# r60: the block row's BLK128x128 threshold by layer size (VEC128 up to M = 255 on N, K <= 8192):
# t_gpu_aq_lt_fp8, and the e4m3 rows at M = 64-256 with 30 runs and four passes.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build/tests /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet.patch.zst -o build/qvet
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/t_gpu_aq_lt_fp8.patch.zst -o build/tests/t_gpu_aq_lt_fp8
chmod +x build/qvet build/tests/*
export QVET_GOLDEN=$R/.dev/golden
pack() { tar cf $OUT/r60.tar res; }
trap pack EXIT
( timeout 200 ./build/tests/t_gpu_aq_lt_fp8 > res/t_gpu_aq_lt_fp8.log 2>&1; echo "rc=$?" >> res/t_gpu_aq_lt_fp8.log )
grep -E "^[0-9]+%|rc=|FAIL|BLK128|forced" res/t_gpu_aq_lt_fp8.log | head
( time timeout 200 ./build/qvet bench --m 64,128,192,256 --runs 30 --passes 4 --variant 'w8a8-fp8-block128' --out res/blk.jsonl ) > res/blk.txt 2>&1; echo "bench rc=$?"; tail -3 res/blk.txt

# r55: HEAD (queue-mode bench): cuBLAS fp16 and every activation-quantized row at the nine M values
# (two passes); the five new GPU-side mutants of the block and per-token x channel rows.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build/tests /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet.patch.zst -o build/qvet
chmod +x build/qvet
export QVET_GOLDEN=$R/.dev/golden
pack() { cp -r mutants/out/gpu/kill.* res/ 2>/dev/null; tar cf $OUT/r55.tar res; }
trap pack EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt 2>&1
( time timeout 330 ./build/qvet bench --runs 20 --variant 'cublas-f16,qqq-*,w8a8-*' --out res/full.jsonl ) > res/full.txt 2>&1; echo "bench rc=$?"
tail -3 res/full.txt
( time timeout 200 python3 tools/mutants.py --gpu --unpack --run-only --only gpu_aq_block_scale_n_floor,gpu_aq_block_scale_token_major,gpu_lt_fp8_scales_unpadded,gpu_lt_fp8_two_step_scale_swap,blk_scales_unpadded ) > res/mutants.log 2>&1
tail -9 res/mutants.log

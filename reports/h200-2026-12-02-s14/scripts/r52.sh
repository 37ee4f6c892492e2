# r52: per token x channel's two-step form (cuBLASLt per tensor into fp32, then the scales): t_gpu_aq_lt_fp8 in
# full; the tok-ch row's forms and thresholds timed against its cuBLASLt baselines.
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
pack() { tar cf $OUT/r52.tar res; }
trap pack EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt 2>&1
( timeout 200 ./build/tests/t_gpu_aq_lt_fp8 > res/t_gpu_aq_lt_fp8.log 2>&1; echo "rc=$?" >> res/t_gpu_aq_lt_fp8.log ) 
grep -E "^[0-9]+%|rc=|FAIL|forced|cases x" res/t_gpu_aq_lt_fp8.log | head -20
B="./build/qvet bench --runs 20 --passes 1 --variant w8a8-fp8-tok-ch"
timeout 100 $B --m 1,4,16,32,64,128,256 --out res/dflt.jsonl > res/dflt.txt 2>&1; echo "dflt rc=$?"
QVET_AQ_LT_FP8_MIN_M=1 timeout 100 $B --m 1,4,16,32,64,128,256 --out res/two.jsonl > res/two.txt 2>&1; echo "two rc=$?"
QVET_AQ_LT_FP8_MIN_M=1 QVET_AQ_LT_FP8_OUTER_MIN_M=1 timeout 100 $B --m 1,4,16,32,64,128,256 --out res/outer.jsonl > res/outer.txt 2>&1; echo "outer rc=$?"
QVET_AQ_LT_FP8_MIN_M=1 QVET_AQ_LT_FP8_OUTER_MIN_M=off timeout 100 $B --m 128,256,512,1024 --out res/twobig.jsonl > res/twobig.txt 2>&1; echo "twobig rc=$?"
for f in dflt two outer twobig; do echo "== $f"; grep -E '^(variant|cublas-f16|cublaslt-fp8 |cublaslt-fp8-tok-ch|w8a8-fp8-tok-ch) ' res/$f.txt; done

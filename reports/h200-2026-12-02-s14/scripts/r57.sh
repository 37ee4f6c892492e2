# r57: HEAD (bench queue mode behind a sleeping wait kernel): cuBLAS fp16 and every activation-quantized
# row at the nine M values; then every weight-only row (queue-mode timing) at the nine M values.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet.patch.zst -o build/qvet
chmod +x build/qvet
pack() { tar cf $OUT/r57.tar res; }
trap pack EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt 2>&1
( time timeout 200 ./build/qvet bench --runs 20 --variant 'cublas-f16,qqq-*,w8a8-*' --out res/aq.jsonl ) > res/aq.txt 2>&1; echo "aq rc=$?"; tail -3 res/aq.txt
( time timeout 380 ./build/qvet bench --runs 20 --variant 'marlin-*' --out res/wo.jsonl ) > res/wo.txt 2>&1; echo "wo rc=$?"; tail -3 res/wo.txt
QVET_LT_TRACE=1 timeout 60 ./build/qvet bench --m 16 --runs 5 --passes 1 --variant 'w8a8-fp8-block128' --model llama2-7b > res/trace-bench.txt 2> res/trace.txt; echo "trace rc=$?"
sort res/trace.txt | uniq | grep 'm=16 n=12288' | head

# r50: the final build: the W4A8 points of DESIGN.md §8 (qqq rows with the quantizer, cuBLAS fp16 in the
# same run), twice; the cuBLASLt algorithm configurations of the e4m3 block row and its baselines at M = 1024.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet-pdl.patch.zst -o build/qvet
chmod +x build/qvet
pack() { tar cf $OUT/r50.tar res; }
trap pack EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt 2>&1
for t in 1 2; do
  timeout 120 ./build/qvet bench --m 1,16,64,1024 --runs 20 --variant 'cublas-f16,qqq-*' --out res/qqq-$t.jsonl > res/qqq-$t.txt 2>&1
  echo "qqq $t rc=$?"
done
grep -A9 'block (qkv' res/qqq-1.txt | grep -E 'variant|cublas-f16|qqq'
grep -A9 'block (qkv' res/qqq-2.txt | grep -E 'variant|cublas-f16|qqq'
QVET_LT_TRACE=1 timeout 60 ./build/qvet bench --m 1024 --runs 5 --variant 'w8a8-fp8-block128' --model llama2-7b > res/trace-bench.txt 2> res/trace.txt
echo "trace rc=$?"
sort res/trace.txt | uniq | grep 'm=1024' | head -20

# r49: the final build (a38d355 + the cuBLASLt algorithm trace): full t_gpu_aq and t_gpu_aq_wg;
# QVET_LT_TRACE=1 on the e4m3 block and token x channel rows and their cuBLASLt baselines.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build/tests /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet-pdl.patch.zst -o build/qvet
for t in t_gpu_aq t_gpu_aq_wg; do $Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/$t.patch.zst -o build/tests/$t; done
chmod +x build/qvet build/tests/*
export QVET_GOLDEN=$R/.dev/golden
pack() { tar cf $OUT/r49.tar res; }
trap pack EXIT
QVET_LT_TRACE=1 timeout 120 ./build/qvet bench --m 4,16,128,1024 --runs 10 --variant 'w8a8-fp8-block128,w8a8-fp8-tok-ch,w8a8-fp8-tensor' --out res/trace-bench.jsonl > res/trace-bench.txt 2> res/trace.txt
echo "trace rc=$?"
sort res/trace.txt | uniq | head -80
( timeout 250 ./build/tests/t_gpu_aq > res/t_gpu_aq.log 2>&1; echo "t_gpu_aq rc=$?" >> res/t_gpu_aq.log ) &
( timeout 280 ./build/tests/t_gpu_aq_wg > res/t_gpu_aq_wg.log 2>&1; echo "t_gpu_aq_wg rc=$?" >> res/t_gpu_aq_wg.log ) &
wait
grep -E "^[0-9]+%|rc=|FAIL" res/t_gpu_aq.log res/t_gpu_aq_wg.log | head

# r59: HEAD: racecheck and memcheck on the benchmark's wait kernel (a short bench), and racecheck on
# t_gpu_aq quick for the block row (qv_act_quant_groups, the mma kernel's MN-major scales).
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build/tests /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet.patch.zst -o build/qvet
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/t_gpu_aq.patch.zst -o build/tests/t_gpu_aq
chmod +x build/qvet build/tests/*
export QVET_GOLDEN=$R/.dev/golden
pack() { tar cf $OUT/r59.tar res; }
trap pack EXIT
CS=/usr/local/cuda/bin/compute-sanitizer; command -v compute-sanitizer >/dev/null && CS=compute-sanitizer
B="./build/qvet bench --m 1 --runs 3 --passes 1 --model llama2-7b --variant marlin-w4a16-ch-f16"
timeout 150 $CS --tool racecheck $B > res/race-bench.log 2>&1; echo "race bench rc=$?"; grep -E 'SUMMARY|Race reported' res/race-bench.log | sed 's/+0x[0-9a-f]*//' | sort | uniq -c | head
timeout 100 $CS --tool memcheck $B > res/mem-bench.log 2>&1; echo "mem bench rc=$?"; grep -E 'ERROR SUMMARY' res/mem-bench.log
QVET_AQ_QUICK=1 QVET_AQ_ROWS=w8a8-fp8-block128 timeout 250 $CS --tool racecheck ./build/tests/t_gpu_aq > res/race-aq.log 2>&1; echo "race aq rc=$?"; grep -E '^[0-9]+%|SUMMARY|:F:|:E:' res/race-aq.log | head

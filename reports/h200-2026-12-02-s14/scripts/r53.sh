# r53: fc68be8 (block row: MN-major activation scales, packed cuBLASLt weight-scale forms; tok-ch two steps):
# t_gpu_aq_lt_fp8, t_gpu_aq, qvet check on the e4m3 rows, racecheck/memcheck on the new kernel and the padded
# block path, and the e4m3 rows against cuBLASLt at every M with two passes.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build/tests /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet.patch.zst -o build/qvet
for t in t_gpu_aq t_gpu_aq_lt_fp8; do $Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/$t.patch.zst -o build/tests/$t; done
chmod +x build/qvet build/tests/*
export QVET_GOLDEN=$R/.dev/golden
pack() { tar cf $OUT/r53.tar res; }
trap pack EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt 2>&1
( timeout 200 ./build/tests/t_gpu_aq_lt_fp8 > res/t_gpu_aq_lt_fp8.log 2>&1; echo "rc=$?" >> res/t_gpu_aq_lt_fp8.log ) &
( timeout 250 ./build/tests/t_gpu_aq > res/t_gpu_aq.log 2>&1; echo "rc=$?" >> res/t_gpu_aq.log ) &
( timeout 250 ./build/qvet check --gpu --variant 'w8a8-fp8-*' --out res/check.jsonl > res/check.txt 2>&1; echo "rc=$?" >> res/check.txt ) &
wait
grep -E "^[0-9]+%|rc=|FAIL|forced|cases x|declined" res/t_gpu_aq_lt_fp8.log | head
grep -E "^[0-9]+%|rc=|:F:|:E:" res/t_gpu_aq.log | head
tail -4 res/check.txt
CS=/usr/local/cuda/bin/compute-sanitizer; command -v compute-sanitizer >/dev/null && CS=compute-sanitizer
timeout 120 $CS --tool racecheck --kernel-name kns=k_aq_lt_fp8_outer_scales ./build/qvet check --gpu --variant 'w8a8-fp8-tok-ch' --cap 2000000 --quiet > res/race-outer.log 2>&1; echo "race rc=$?"; tail -3 res/race-outer.log
timeout 150 $CS --tool memcheck ./build/qvet check --gpu --variant 'w8a8-fp8-block128' --cap 2000000 --quiet > res/mem-blk.log 2>&1; echo "mem rc=$?"; tail -3 res/mem-blk.log
timeout 200 ./build/qvet bench --runs 20 --variant 'w8a8-fp8-*' --out res/fp8.jsonl > res/fp8.txt 2>&1; echo "bench rc=$?"
grep -E '^(variant|cublaslt-fp8|w8a8-fp8)' res/fp8.txt | grep -v '+aq' | head -40

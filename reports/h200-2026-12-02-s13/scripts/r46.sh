# r46: the new defaults (3 per SM for QQQ's small tile, cluster rules, PDL for cluster launches, QQQ wide
# layers on wgmma, 16/32-token QQQ tiles): tests, racecheck, A/B against d767adc, full run.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r46.tar res; }
trap pack EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > res/smi.txt 2>&1
( timeout 200 ./build/tests/t_gpu_aq > res/t_gpu_aq.log 2>&1; echo "t_gpu_aq rc=$?" >> res/t_gpu_aq.log ) &
( QVET_AQ_QUICK=1 timeout 200 ./build/tests/t_gpu_aq_wg > res/t_gpu_aq_wg.log 2>&1; echo "t_gpu_aq_wg quick rc=$?" >> res/t_gpu_aq_wg.log;
  timeout 100 ./build/tests/t_gpu_aq_chain > res/t_gpu_aq_chain.log 2>&1; echo "chain rc=$?" >> res/t_gpu_aq_chain.log;
  timeout 100 ./build/tests/t_gpu_aq_lt > res/t_gpu_aq_lt.log 2>&1; echo "lt rc=$?" >> res/t_gpu_aq_lt.log ) &
( QVET_AQ_QUICK=1 QVET_AQ_ROWS=qqq-w4a8-ch timeout 150 compute-sanitizer --tool racecheck ./build/tests/t_gpu_aq > res/race-qqq-ch.log 2>&1; echo "racecheck rc=$?" >> res/race-qqq-ch.log;
  QVET_AQ_QUICK=1 QVET_AQ_ROWS=w8a8-i8-tok-ch timeout 100 compute-sanitizer --tool memcheck ./build/tests/t_gpu_aq > res/mem-i8.log 2>&1; echo "memcheck rc=$?" >> res/mem-i8.log ) &
wait
grep -E "^[0-9]+%|rc=|FAIL" res/t_gpu_*.log | head -20
grep -h "SUMMARY\|rc=\|^[0-9]*%" res/race-*.log res/mem-*.log
V='cublas-f16,qqq-*,w8a8-i8-*'
for turn in 1 2; do
  for b in base build; do
    timeout 100 ./$b/qvet bench --m 1,4,8,9,16,24,32 --runs 20 --variant "$V" --out res/ab-$b-$turn.jsonl > res/ab-$b-$turn.txt 2>&1
    echo "bench $b $turn rc=$?" >> res/bench-rc.txt
  done
done
timeout 200 ./build/qvet bench --m 1,4,16,32,64,128,256,512,1024 --runs 20 --variant 'cublas-f16,qqq-*,w8a8-*' --out res/full.jsonl > res/full.txt 2>&1
echo "full rc=$?" >> res/bench-rc.txt
cat res/bench-rc.txt
grep -A12 'llama2-7b block (qkv' res/full.txt | grep 'qqq\|cublas-f16'
grep -A12 'llama3-70b block (qkv' res/full.txt | grep 'qqq\|cublas-f16'

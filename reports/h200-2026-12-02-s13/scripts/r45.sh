# r45: cluster-fitted splits for the integer paths, PDL for cluster launches up to M = 16, trace;
# variants dflt / bps3 (uncommitted on d767adc).
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r45.tar res; }
trap pack EXIT
( timeout 200 ./build/tests/t_gpu_aq > res/t_gpu_aq.log 2>&1; echo "t_gpu_aq rc=$?" >> res/t_gpu_aq.log ) &
( timeout 100 ./build/tests/t_gpu_aq_chain > res/t_gpu_aq_chain.log 2>&1; echo "chain rc=$?" >> res/t_gpu_aq_chain.log ) &
wait
grep -E "^[0-9]+%|rc=|FAIL" res/t_gpu_aq.log res/t_gpu_aq_chain.log | head -20
QVET_AQ_TRACE=1 ./build/qvet bench --m 1,8,9,16 --runs 3 --variant 'qqq-*' > /dev/null 2> res/trace-dflt.txt
QVET_AQ_BLOCKS_PER_SM=3 QVET_AQ_TRACE=1 ./build/qvet bench --m 9,16 --runs 3 --variant 'qqq-*' > /dev/null 2> res/trace-bps3.txt
sort res/trace-dflt.txt | uniq -c | sort -rn | head -40
sort res/trace-bps3.txt | uniq -c | sort -rn | head -20
V='cublas-f16,qqq-*,w8a8-i8-*'
for turn in 1 2; do
  for b in dflt bps3; do
    case $b in
      dflt) env="X=1";;
      bps3) env="QVET_AQ_BLOCKS_PER_SM=3";;
    esac
    env $env timeout 100 ./build/qvet bench --m 1,4,8,9,16 --runs 20 --variant "$V" --out res/ab-$b-$turn.jsonl > res/ab-$b-$turn.txt 2>&1
    echo "bench $b $turn rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt

#!/bin/bash
# r151: where the 4-bit layers' per-layer loss of r149 comes from (Llama-3-70B gate_up, the two-chunk
# 4-bit kernel, +3 % with any QVET_WO_SMALL_PRE): qb / qn (committed) / v1 (qn with thread 0 issuing all
# first stages in one loop and waiting inside it) / v2 (qn with the scales after A again, only the
# first stages before the wait) in turns, six rows, M = 1, 4, 8, three turns; t_gpu_wonly_chain of v1, v2.
set -u
cd .dev
xz -dc qb.xz > qb; chmod +x qb
./zstd -q -d -f --long=27 --patch-from=qb qn.zst -o qn; chmod +x qn
mkdir -p tests
for v in v1 v2; do ./zstd -q -d -f --long=27 --patch-from=qn $v.zst -o $v; chmod +x $v
  ./zstd -q -d -f --long=27 --patch-from=qn $v-t_gpu_wonly_chain.zst -o tests/$v-t_gpu_wonly_chain; chmod +x tests/$v-t_gpu_wonly_chain; done
export QVET_GOLDEN=$PWD/golden
O=/tmp/r151; rm -rf $O; mkdir -p $O
run() { local name=$1; shift; ( s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt ) }
T1=$(date +%s)
V='marlin-w4a16-ch-f16,marlin-w4a16-ch-bf16,marlin-w4a16-g32-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16,marlin-w8a16-g128-f16'
C=(qb qn v1 v2)
for t in 1 2 3; do for i in 0 1 2 3; do c=${C[$(( (i + t) % 4 ))]}; for mdl in llama3-70b llama2-7b; do
  timeout 40 ./$c bench --model $mdl --m 1,4,8 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$c-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$c-$mdl-$t failed"
done; done; done
echo "ab secs=$(( $(date +%s) - T1 ))"
for v in v1 v2; do run chain-$v timeout 100 tests/$v-t_gpu_wonly_chain & done
wait
for f in $O/chain-*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
python3 ab.py $O qb qn v1 v2 > $O/ab.txt 2>&1
python3 ab.py --summary $O qb qn v1 v2 2>&1 | tee $O/ab-summary.txt
tar -C /tmp -czf $OUT/r151.tgz r151

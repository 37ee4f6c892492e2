#!/bin/bash
# r149: qn = the candidate commit (small-M kernel: scales and the first 1 (4-bit) / 2 (8-bit) ring stages
# before griddepcontrol.wait, trigger after it); qt = qn with the trigger at block start as before;
# qb = HEAD (035a815). (1) every suite that uses the GPU, built from qn's tree, side by side;
# (2) qb / qn / qt in turns, every marlin row, M = 1, 4, 8, 16, three turns, order rotated;
# (3) qn's README table against cuBLAS fp16. Also the chain suite's witness: qn's kernels built with
# -DQV_WO_SMALL_PDL_NO_WAIT=1 (no griddepcontrol.wait; measurements only) must fail it.
set -u
cd .dev
xz -dc qb.xz > qb; chmod +x qb
./zstd -q -d -f --long=27 --patch-from=qb qn.zst -o qn; chmod +x qn
./zstd -q -d -f --long=27 --patch-from=qn qt.zst -o qt; chmod +x qt
mkdir -p tests
for z in tn/*.zst; do t=$(basename $z .zst); ./zstd -q -d -f --long=27 --patch-from=qn $z -o tests/$t; chmod +x tests/$t; done
./zstd -q -d -f --long=27 --patch-from=qn nw-t_gpu_wonly_chain.zst -o tests/nw-t_gpu_wonly_chain; chmod +x tests/nw-t_gpu_wonly_chain
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden QVET_BIN=$PWD/qn
O=/tmp/r149; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
run() { local name=$1; shift; ( s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt ) }
T0=$(date +%s)
for f in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$f run t_gpu_wonly-$f timeout 280 tests/t_gpu_wonly & done
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); QVET_WG_ROWS="$pat" run t_gpu_wg-$i timeout 280 tests/t_gpu_wg &
done
( for t in t_gpu_aq t_gpu_aq_chain t_gpu_aq_lt t_gpu_aq_wg t_gpu_ppl t_bench_cli t_campaign; do run $t timeout 200 tests/$t; done ) &
( for t in t_gpu_ws t_gpu_aq_lt_fp8 t_gpu_campaign t_gpu_wonly_chain; do run $t timeout 200 tests/$t; done ) &
QVET_WONLY_ROWS=marlin-w4a16-ch-f16 run nowait-chain-ch-f16 timeout 90 tests/nw-t_gpu_wonly_chain &
wait
grep -E '^[0-9]+%: Checks|FAIL' $O/nowait-chain-ch-f16.txt | head -3 | cut -c1-250
echo "suites secs=$(( $(date +%s) - T0 ))"
for f in $O/t_*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "^FAIL\|:F:\|:E:" $O/t_*.txt | head -6 | cut -c1-300
T1=$(date +%s)
C=(qb qn qt)
for t in 1 2 3; do for i in 0 1 2; do c=${C[$(( (i + t) % 3 ))]}; for mdl in llama3-70b llama2-7b; do
  timeout 60 ./$c bench --model $mdl --m 1,4,8,16 --runs 20 --passes 1 --no-pair --variant 'marlin-*' --out $O/ab-$c-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$c-$mdl-$t failed"
done; done; done
echo "ab secs=$(( $(date +%s) - T1 ))"
T2=$(date +%s)
timeout 200 ./qn bench --runs 20 --variant 'cublas-f16,marlin-*' --out $O/wo-1.jsonl > $O/wo-1.txt 2>&1 || echo "table failed"
echo "table secs=$(( $(date +%s) - T2 ))"
python3 ab.py $O qb qn qt > $O/ab.txt 2>&1
python3 ab.py --summary $O qb qn qt 2>&1 | tee $O/ab-summary.txt
tar -C /tmp -czf $OUT/r149.tgz r149

#!/bin/bash
# r147: qn = HEAD's kernels with their first weights requested before griddepcontrol.wait (small-M:
# QVET_WO_SMALL_PRE ring stages and every scale; wgmma: QVET_WO_WG_PRE stages' weight, scale and zero-point
# boxes) and the dependents' trigger moved after the wait; qb = HEAD (035a815).
# (1) qn's t_gpu_wonly by family, t_gpu_wonly_chain (now 4 repeats: defaults, workspace sums, PRE=0, whole ring),
#     t_gpu_wg by row pattern; (2) per-layer and chained blocks in turns: qb, qn with PRE 0/0, the defaults
#     (small 4, wg 1), small 1 / 2, wg 2 / 4 / the whole ring; M = 1, 4, 8, 16, 32, 64; two turns.
set -u
cd .dev
xz -dc qb.xz > qb; chmod +x qb
./zstd -q -d -f --long=27 --patch-from=qb qn.zst -o qn; chmod +x qn
mkdir -p tests
for t in t_gpu_wonly t_gpu_wonly_chain t_gpu_wg; do ./zstd -q -d -f --long=27 --patch-from=qn n-$t.zst -o tests/$t; chmod +x tests/$t; done
export PATH=$PATH:/usr/local/cuda/bin
export QVET_GOLDEN=$PWD/golden
O=/tmp/r147; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
run() { local name=$1; shift; ( s=$(date +%s); "$@" > $O/$name.txt 2>&1; echo "rc=$? secs=$(( $(date +%s) - s ))" >> $O/$name.txt ) }
T0=$(date +%s)
for f in w4a16-g w4a16-ch w8a16 fp8a16; do QVET_WONLY_ROWS=$f run t_gpu_wonly-$f timeout 300 tests/t_gpu_wonly & done
run t_gpu_wonly_chain timeout 300 tests/t_gpu_wonly_chain &
i=0
for pat in 'marlin-w4a16-*-f16' 'marlin-w4a16-*-bf16' 'marlin-w8a16-*' 'marlin-fp8a16-*'; do
  i=$((i+1)); QVET_WG_ROWS="$pat" run t_gpu_wg-$i timeout 300 tests/t_gpu_wg &
done
wait
echo "suites secs=$(( $(date +%s) - T0 ))"
for f in $O/t_*.txt; do echo "$(basename $f .txt): $(grep -E '^[0-9]+%: Checks' $f | tail -1) $(tail -1 $f)"; done | tee $O/summary.txt
grep -h "^FAIL\|:F:\|:E:" $O/t_*.txt | head -6 | cut -c1-300
T1=$(date +%s)
V='marlin-w4a16-ch-f16,marlin-w4a16-g128-f16,marlin-fp8a16-ch-f16,marlin-w8a16-g128-f16,marlin-fp8a16-g128-bf16'
for t in 1 2; do for c in qb p0 def s1 s2 w2 w4 wall; do for mdl in llama3-70b llama2-7b; do
  b=qn; e=""
  case $c in
    qb) b=qb;; p0) e="QVET_WO_SMALL_PRE=0 QVET_WO_WG_PRE=0";; def) ;;
    s1) e="QVET_WO_SMALL_PRE=1";; s2) e="QVET_WO_SMALL_PRE=2";;
    w2) e="QVET_WO_WG_PRE=2";; w4) e="QVET_WO_WG_PRE=4";; wall) e="QVET_WO_WG_PRE=64";;
  esac
  env $e timeout 100 ./$b bench --model $mdl --m 1,4,8,16,32,64 --runs 20 --passes 1 --no-pair --variant "$V" --out $O/ab-$c-$mdl-$t.jsonl > /dev/null 2>&1 || echo "$c-$mdl-$t failed"
done; done; done
echo "bench secs=$(( $(date +%s) - T1 ))"
python3 ab.py $O qb p0 def s1 s2 w2 w4 wall 2>&1 | tee $O/ab.txt | tail -70
tar -C /tmp -czf $OUT/r147.tgz r147

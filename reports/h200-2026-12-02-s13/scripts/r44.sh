# r44: cluster split-K rule (long slices at 2/SM keep the workspace), QQQ wide layers at M<=16 on wgmma;
# env variants of the plan and the quantizer (uncommitted on d767adc).
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r44.tar res; }
trap pack EXIT
( timeout 200 ./build/tests/t_gpu_aq > res/t_gpu_aq.log 2>&1; echo "t_gpu_aq rc=$?" >> res/t_gpu_aq.log ) &
( QVET_AQ_QUICK=1 timeout 200 ./build/tests/t_gpu_aq_wg > res/t_gpu_aq_wg.log 2>&1; echo "t_gpu_aq_wg quick rc=$?" >> res/t_gpu_aq_wg.log;
  timeout 100 ./build/tests/t_gpu_aq_chain > res/t_gpu_aq_chain.log 2>&1; echo "chain rc=$?" >> res/t_gpu_aq_chain.log ) &
wait
grep -E "^[0-9]+%|rc=|FAIL" res/t_gpu_aq.log | head -20
grep -E "^[0-9]+%|rc=|FAIL" res/t_gpu_aq_wg.log res/t_gpu_aq_chain.log | head -20
V='cublas-f16,qqq-*'
for turn in 1 2; do
  for b in dflt bps3 cl8pdl cl0pdl; do
    case $b in
      dflt) env="X=1";;
      bps3) env="QVET_AQ_BLOCKS_PER_SM=3";;
      cl8pdl) env="QVET_AQ_CLUSTER_M=8 QVET_AQ_PDL_MAX_M=16";;
      cl0pdl) env="QVET_AQ_CLUSTER_M=0 QVET_AQ_PDL_MAX_M=16";;
    esac
    env $env timeout 100 ./build/qvet bench --m 1,4,8,9,16 --runs 20 --variant "$V" --out res/ab-$b-$turn.jsonl > res/ab-$b-$turn.txt 2>&1
    echo "bench $b $turn rc=$?" >> res/bench-rc.txt
  done
done
cat res/bench-rc.txt
python3 - <<'PY'
import json
def load(f):
    d={}
    for l in open(f):
        try: r=json.loads(l)
        except Exception: continue
        if r.get('kind')=='bench' and r.get('layer'):
            d[(r['variant'],r['model'],r['m'],r['layer'])]=r['median_us']
            if 'with_act_quant_us' in r: d[(r['variant']+'+aq',r['model'],r['m'],r['layer'])]=r['with_act_quant_us']
    return d
B=['dflt','bps3','cl8pdl','cl0pdl']
T={}
for b in B:
    ds=[load('res/ab-%s-%d.jsonl'%(b,t)) for t in (1,2)]
    T[b]={k:(ds[0][k]+ds[1][k])/2 for k in ds[0] if k in ds[1]}
for k in sorted(T['dflt']):
    if not k[0].startswith('qqq'): continue
    print('%-18s %-10s %2d %-8s '%k + ' '.join('%s %7.1f'%(b,T[b].get(k,0)) for b in B))
PY

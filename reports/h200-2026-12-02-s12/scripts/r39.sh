# r39: HEAD (e399a67): the M = 9-16 routing timed end to end; per-layer small-M kernel
# (QVET_WO_WG_MIN_M=17) against wgmma (=9) at M = 9..16; t_gpu_wg quick.
set -u
R=$PWD
xz -dc .dev/bin.tar.xz | tar xf -
export QVET_GOLDEN=$R/.dev/golden
mkdir -p res
pack() { tar cf $OUT/r39.tar res; }
trap pack EXIT
M=1,4,9,10,12,14,16
for cfg in default small wg; do
  case $cfg in default) E="";; small) E="QVET_WO_WG_MIN_M=17";; wg) E="QVET_WO_WG_MIN_M=9";; esac
  env $E timeout 200 ./build/qvet bench --m $M --runs 20 --variant 'marlin-*' --out res/r39-$cfg.jsonl > res/r39-$cfg.txt 2>&1
  echo "bench $cfg rc=$?" >> res/bench-rc.txt
done
cat res/bench-rc.txt
( QVET_WG_QUICK=1 timeout 300 ./build/tests/t_gpu_wg > res/t_gpu_wg-quick.log 2>&1; echo "t_gpu_wg quick rc=$?" >> res/t_gpu_wg-quick.log ) 
grep -E "^[0-9]+%|rc=" res/t_gpu_wg-quick.log
python3 - <<'PY'
import json
def lay(f):
    d={}
    for l in open(f):
        try: r=json.loads(l)
        except Exception: continue
        if r.get('kind')=='bench' and r.get('layer'): d[(r['variant'],r['model'],r['m'],r['layer'])]=r['median_us']
    return d
R={c:lay(f'res/r39-{c}.jsonl') for c in ('default','small','wg')}
for v in ('marlin-w4a16-ch-f16','marlin-w4a16-g128-f16','marlin-fp8a16-ch-f16','marlin-w8a16-g128-f16'):
  for mdl in ('llama3-70b','llama2-7b'):
    for L in ('gate_up','down','qkv','o','block'):
      print('%-22s %-10s %-7s'%(v,mdl,L)+' '.join('M%d d%6.1f s%6.1f w%6.1f |'%(m,R['default'].get((v,mdl,m,L),0),R['small'].get((v,mdl,m,L),0),R['wg'].get((v,mdl,m,L),0)) for m in (9,12,16)))
PY

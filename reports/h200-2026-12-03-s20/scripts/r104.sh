#!/bin/bash
# r104: where the Llama-2-7B act_order time goes at M = 1024: ncu (clocks and caches left alone)
# on q3's permutation and wgmma kernels, act-f16 against g128-f16 (same GEMM, A in place):
# each kernel's duration and DRAM bytes, every launch of a one-run bench.
set -u
cd .dev
xz -dc qvet.xz > q0
./zstd -q -d -f --long=27 --patch-from=q0 q3.zst -o q3
chmod +x q3
NCU=/usr/local/cuda/bin/ncu
for V in marlin-w4a16-g128-act-f16 marlin-w4a16-g128-f16; do
  timeout 250 $NCU --clock-control none --cache-control none -k 'regex:k_gemm_wonly_wgmma|k_wg_permute' --csv --print-kernel-base function \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
    ./q3 bench --model llama2-7b --m 1024 --runs 3 --passes 1 --no-pair --variant $V > $OUT/ncu-$V.csv 2> $OUT/ncu-$V.err
  echo "$V rc=$?"
done
python3 - <<'PY' | tee $OUT/summary.txt
import csv,os,collections
O=os.environ['OUT']
for V in ['marlin-w4a16-g128-act-f16','marlin-w4a16-g128-f16']:
    rows=[r for r in csv.reader(l for l in open(f'{O}/ncu-{V}.csv') if l.startswith('"'))]
    if not rows: print(V,'no rows'); continue
    h=rows[0]; ix={k:i for i,k in enumerate(h)}
    d=collections.OrderedDict()
    for r in rows[1:]:
        if len(r)!=len(h): continue
        key=(int(r[ix['ID']]),r[ix['Kernel Name']][:24],r[ix.get('Grid Size',0)])
        d.setdefault(key,{})[r[ix['Metric Name']]]=r[ix['Metric Value']]
    print(V)
    for k,m in d.items(): print('  ',*k,' '.join(f"{n.split('.')[0]}={v}" for n,v in sorted(m.items())))
PY

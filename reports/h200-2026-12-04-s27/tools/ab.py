#!/usr/bin/env python3
"""Blocks per build or setting: the mean over the turns of each (model, row, M)
block (the four layers' medians summed) and chain (the four layers back to
back between two events), from `qvet bench --out` files named
ab-<config>-<model>-<turn>.jsonl[.gz] in DIR. The first config is the
reference; the others print their difference from it.
With --summary, one line per (model, M, block or chain): the mean over the
rows of each config's difference from the first, and the rows it is faster on.
Usage: ab.py [--summary] DIR CONFIG [CONFIG ...]"""
import collections, glob, gzip, json, statistics, sys

args = sys.argv[1:]
summary = bool(args) and args[0] == '--summary'
if summary:
    args = args[1:]
d, cfgs = args[0], args[1:]
layers = collections.defaultdict(lambda: collections.defaultdict(list))  # (cfg, model, row, m, turn) -> layer -> us
for f in glob.glob(d + '/ab-*.jsonl*'):
    name = f.split('/')[-1].split('.')[0]
    parts = name.split('-')
    cfg, model, turn = parts[1], '-'.join(parts[2:-1]), parts[-1]
    op = gzip.open if f.endswith('.gz') else open
    for line in op(f, 'rt'):
        r = json.loads(line)
        if r.get('kind') != 'bench' or r.get('variant') in ('copy', None) or r.get('model') is None:
            continue
        layers[(cfg, model, r['variant'], r['m'], turn)][r['layer']].append(r['median_us'])
agg = collections.defaultdict(list)  # (cfg, model, row, m, what) -> values over turns
for (cfg, model, row, m, turn), ls in layers.items():
    if all(x in ls for x in ('qkv', 'o', 'gate_up', 'down')):
        agg[(cfg, model, row, m, 'block')].append(sum(statistics.mean(ls[x]) for x in ('qkv', 'o', 'gate_up', 'down')))
    if 'chain' in ls:
        agg[(cfg, model, row, m, 'chain')].append(statistics.mean(ls['chain']))
keys = sorted(set(k[1:] for k in agg))
if summary:
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for k in keys:
        if 'cublas' in k[1] or not agg.get((cfgs[0],) + k):
            continue
        r0 = statistics.mean(agg[(cfgs[0],) + k])
        for c in cfgs[1:]:
            v = agg.get((c,) + k)
            if v:
                groups[(k[0], k[2], k[3])][c].append(statistics.mean(v) / r0 - 1)
    print("%-10s %4s %-5s " % ("model", "M", "what") + " ".join("%16s" % c for c in cfgs[1:]))
    for g in sorted(groups):
        cells = []
        for c in cfgs[1:]:
            x = groups[g][c]
            cells.append("%+6.2f%% %3d/%-3d" % (100 * statistics.mean(x), sum(1 for y in x if y < 0), len(x)) if x else "%16s" % "-")
        print("%-10s %4d %-5s " % g + " ".join(cells))
    sys.exit(0)
print("%-10s %-26s %4s %-5s " % ("model", "row", "M", "what") + " ".join("%13s" % c for c in cfgs))
for k in keys:
    ref = agg.get((cfgs[0],) + k)
    if not ref:
        continue
    r0 = statistics.mean(ref)
    cells = ["%13.1f" % r0]
    for c in cfgs[1:]:
        v = agg.get((c,) + k)
        cells.append("%6.1f %+5.1f%%" % (statistics.mean(v), 100 * (statistics.mean(v) / r0 - 1)) if v else "%13s" % "-")
    print("%-10s %-26s %4d %-5s " % (k[0], k[1].replace('marlin-', ''), k[2], k[3]) + " ".join(cells))

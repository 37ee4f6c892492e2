#!/usr/bin/env python3
"""Same-run A/B per layer: mean over the turns of each (model, row, M, layer)
median, build A against build B, from `qvet bench --out` files named
ab-<build>-<model>-<turn>.jsonl[.gz] in DIR.
Usage: ab-layers.py DIR A B"""
import collections, glob, gzip, json, statistics, sys

d, A, B = sys.argv[1:4]
t = collections.defaultdict(list)
for f in glob.glob(d + '/ab-*.jsonl*'):
    b = f.split('/')[-1].split('-')[1]
    op = gzip.open if f.endswith('.gz') else open
    for line in op(f, 'rt'):
        r = json.loads(line)
        if r.get('kind') != 'bench' or r.get('variant') in ('copy', None):
            continue
        t[(r['model'], r['variant'], r['m'], r['layer'], b)].append(r['median_us'])
for k in sorted(set(k[:4] for k in t)):
    a, bb = t.get(k + (A,)), t.get(k + (B,))
    if not a or not bb:
        continue
    ma, mb = statistics.mean(a), statistics.mean(bb)
    print("%-11s %-28s M=%-2d %-8s %8.1f %8.1f %+6.1f%%  [%s | %s]" % (
        k[0], k[1], k[2], k[3], ma, mb, 100 * (mb / ma - 1),
        " ".join("%.1f" % x for x in a), " ".join("%.1f" % x for x in bb)))

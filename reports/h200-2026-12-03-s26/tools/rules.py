"""Candidate rules for two chunks per warp, scored on the one-chunk / two-chunk
A/Bs of r139 (4-bit rows) and r141 (8-bit rows): for each rule, the summed
change of the layers it would switch. Run from this directory:
rules.py [RULE] (RULE: print that rule's picks)."""
import json,glob,gzip,collections,statistics as st,re,sys
def load(d):
    t=collections.defaultdict(list)
    for f in glob.glob(d+'/ab-*.jsonl*')+glob.glob(d+'/e8-*.jsonl*'):
        b=f.split('/')[-1].split('-')[1]
        for l in gzip.open(f,'rt'):
            r=json.loads(l)
            if r.get('kind')!='bench' or r.get('variant') in ('copy',None): continue
            t[(r['model'],r['variant'],r['m'],r['layer'],b)].append(r['median_us'])
    return t
plans={}
for l in open('plans.txt'):
    p=l.split(); row=p[0]; lay=p[1]; m=int(p[2][2:]); cpw=int(p[3][4:])
    g=re.match(r'grid=(\d+)x(\d+)=(\d+)',p[4]); plans[(row,lay,m,cpw)]=dict(nb=int(g.group(1)),sp=int(g.group(2)),blocks=int(g.group(3)),tps=int(p[5][4:]),C=int(p[6][2:]))
lm={'qkv':'qkv','o':'o','gate_up':'gu','down':'down'}
def slots(C): return 264 if C<=2 else (248 if C==4 else 240)
sets=[('../r139',["marlin-w4a16-ch-f16","marlin-w4a16-ch-bf16","marlin-w4a16-g128-f16","marlin-w4a16-g128-bf16","marlin-w4a16-g64-f16","marlin-w4a16-g32-f16","marlin-w4a16-g128-act-f16"]),
      ('../r141',["marlin-fp8a16-ch-f16","marlin-fp8a16-ch-bf16","marlin-fp8a16-g128-f16","marlin-fp8a16-tensor-f16","marlin-w8a16-ch-f16","marlin-w8a16-g128-f16"])]
def full(p1,p2): return 4*p2['blocks']>=3*slots(p2['C'])
light=lambda row: ('w8a16' in row or 'fp8a16' in row) and row.endswith('-f16') and 'g128' not in row
rules={'committed':lambda p1,p2,row: full(p1,p2) and (p2['sp']<=p1['sp'] or (p1['blocks']>slots(p1['C']) and p2['tps']>=64) or (not light(row) and p2['tps']>=128)),
'R15':lambda p1,p2,row: full(p1,p2) and (p2['sp']<=p1['sp'] or p2['tps']>=128 or (p1['blocks']>slots(p1['C']) and p2['tps']>=64)),
'R9':lambda p1,p2,row: p2['sp']<=p1['sp'] and full(p1,p2),
 'R11 tps2>=128':lambda p1,p2,row: (p2['sp']<=p1['sp'] or p2['tps']>=128) and full(p1,p2),
 'R12 tps2>=64':lambda p1,p2,row: (p2['sp']<=p1['sp'] or p2['tps']>=64) and full(p1,p2),
 'R13 tps2*2>=tps1 & tps2>=64':lambda p1,p2,row: (p2['sp']<=p1['sp'] or (p2['tps']>=64)) and full(p1,p2) ,
 'R14 tps2>=96':lambda p1,p2,row: (p2['sp']<=p1['sp'] or p2['tps']>=96) and full(p1,p2),
}
verbose=len(sys.argv)>1
for name,rule in rules.items():
  out=[]
  for d,rows in sets:
    t=load(d); tot=0; worst=0; blkw=0; blkb=0
    for row in rows:
      prow=row.replace('bf16','f16')
      for mdl,mm in (('llama3-70b','70b'),('llama2-7b','7b')):
        for m in (1,4,8):
          tb=0;ta=0;s=[]
          for lay in ('qkv','o','gate_up','down'):
            a=st.mean(t[(mdl,row,m,lay,'def')]); b=st.mean(t[(mdl,row,m,lay,'swap2')])
            key=mm+'-'+lm[lay]; p1=plans[(prow,key,m,1)]; p2=plans[(prow,key,m,2)]
            ta+=a
            if rule(p1,p2,row):
                tb+=b-a; worst=max(worst,b-a); s.append("%s %+.1f [%dx%d t%d -> %dx%d t%d]"%(lay,b-a,p1['nb'],p1['sp'],p1['tps'],p2['nb'],p2['sp'],p2['tps']))
          tot+=tb; blkw=max(blkw,100*tb/ta); blkb=min(blkb,100*tb/ta)
          if verbose and s and name==sys.argv[1]: print("  %-22s %-4s M=%d %+.1f%% %s"%(row[7:],mm,m,100*tb/ta,", ".join(s)))
    out.append("%s: total %+.1f worst layer %+.1f block %+.1f..%+.1f%%"%(d[3:],tot,worst,blkb,blkw))
  print("%-30s %s"%(name," | ".join(out)))

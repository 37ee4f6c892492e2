# fit.py: the small-M cost model (kernels/wonly_small.cu make_plan) replayed
# against r125/r126's forced-plan sweep: which plan it picks per (row, M,
# layer), the measured time of that plan, and the sum against the default
# and against the best measured plan per point (the oracle); then a grid of
# its constants. Run from this folder after plans.c wrote def.txt and
# forced.txt here (see plans.c). Python 3, standard library only.
import json,glob,collections,math,itertools,sys,os
HERE=os.path.dirname(os.path.abspath(__file__))
R=os.path.dirname(HERE)
# plans
forced={}  # (s,c,row,m,layer) -> (nb,sp,cl,tps,smem,unit)
feas=collections.defaultdict(set)
for l in open(HERE+'/forced.txt'):
    s,c,row,m,mod,lay,nb,sp,cl,tps,smem,unit=l.split()
    key=(row,int(m),mod+' '+lay)
    v=(int(nb),int(sp),int(cl),int(tps),int(smem),int(unit))
    forced[(int(s),int(c))+key]=v
    feas[key].add(v)
default={}
for l in open(HERE+'/def.txt'):
    row,m,mod,lay,nb,sp,cl,tps,smem,unit=l.split()
    default[(row,int(m),mod+' '+lay)]=(int(nb),int(sp),int(cl),int(tps),int(smem),int(unit))
meas=collections.defaultdict(list)
def load(pattern,model,strip):
    for f in glob.glob(pattern):
        cfg=f.split('/')[-1][len(strip):-6]
        for l in open(f):
            r=json.loads(l)
            if r.get('kind')!='bench' or r.get('model')!=model or r['variant'].startswith('cublas') or r['layer'] in ('block','chain'): continue
            mod='70' if model=='llama3-70b' else '7'
            key=(r['variant'][7:],r['m'],mod+' '+r['layer'])
            if cfg.startswith('def'): p=default[key]
            else:
                s,c=cfg.split('-'); p=forced[(int(s[1:]),int(c[1:]))+key]
            meas[key+(p[1],p[2])].append(r['median_us'])
load(R+'/r125/*.jsonl','llama3-70b','')
load(R+'/r126/l7-*.jsonl','llama2-7b','l7-')
load(R+'/r126/l70g-*.jsonl','llama3-70b','l70g-')
points=sorted(set(k[:3] for k in meas))
# drop 70B large layers at M>=9 (wgmma path)
points=[p for p in points if not (p[2] in ('70 gate_up','70 down') and p[1]>=9)]
def t(key,sp,cl):
    v=meas.get(key+(sp,cl))
    return sum(v)/len(v) if v else None
def slots(c): return {1:264,2:264,4:248,8:240}.get(c,224)
def choose(key,cost):
    best=None
    for (nb,sp,cl,tps,smem,unit) in sorted(feas[key],key=lambda x:(x[1],x[2])):
        if cl>8: continue
        cst=cost(key,nb,sp,cl,tps,unit)
        if best is None or cst<best[0]: best=(cst,sp,cl)
    return best[1],best[2]
def cur(key,nb,sp,cl,tps,unit,F=16):
    m=key[1]; waves=-(-nb*sp//slots(cl))
    c=16*waves*(tps+F)
    if cl==1: c+=16*(sp*m//(4 if m>8 else 8))
    else:
        q=sp//cl; c+=m+16+((2*q*m//cl+32) if q>1 else 0)
    return c
def evaluate(cost,verbose=False):
    tot=0;tdef=0;orc=0;miss=0
    per=collections.defaultdict(lambda:[0,0,0])
    for key in points:
        sp,cl=choose(key,cost)
        dp=default[key]
        td=t(key,dp[1],dp[2]); tc=t(key,sp,cl)
        if td is None: continue
        ts=[sum(v)/len(v) for k,v in meas.items() if k[:3]==key]
        o=min(ts)
        if tc is None: miss+=1; tc=td*1.05
        tot+=tc;tdef+=td;orc+=o
        g=(key[0],key[2][:2]); per[g][0]+=td;per[g][1]+=tc;per[g][2]+=o
        if verbose and abs(tc/td-1)>0.01: print(key,'def',dp[1],dp[2],'%.1f'%td,'-> ',sp,cl,'%.1f'%tc,'oracle %.1f'%o)
    return tot,tdef,orc,miss,per
# check reimplementation
bad=0
for key in points:
    sp,cl=choose(key,cur); d=default[key]
    if (sp,cl)!=(d[1],d[2]): bad+=1; print('mismatch',key,(sp,cl),d)
print('mismatches',bad,'points',len(points))
tot,tdef,orc,miss,per=evaluate(cur)
print('cur: %.1f def %.1f oracle %.1f miss %d'%(tot,tdef,orc,miss))
def gen(F=16,G=0,CL=1.0,QF=1.0,frac=False,C1=1.0):
    def cost(key,nb,sp,cl,tps,unit):
        m=key[1]; grouped='g128' in key[0]
        w=nb*sp/slots(cl)
        waves=w if frac else math.ceil(w)
        groups=(tps+unit-1)//unit if grouped and unit>1 else 0
        c=16*waves*(tps+F+G*groups)
        if cl==1: c+=C1*16*(sp*m//(4 if m>8 else 8))
        else:
            q=sp//cl; c+=CL*(m+16)+((QF*(2*q*m//cl+32)) if q>1 else 0)
        return c
    return cost
res=[]
for F in [8,16,24,32,48]:
  for G in [0,0.5,1,2,4]:
    for CL in [1,4,16]:
      for frac in [False,True]:
        tot,tdef,orc,miss,per=evaluate(gen(F,G,CL,1.0,frac))
        res.append((tot,F,G,CL,frac,miss))
res.sort()
for r in res[:12]: print('%.1f F=%s G=%s CL=%s frac=%s miss=%d'%r)

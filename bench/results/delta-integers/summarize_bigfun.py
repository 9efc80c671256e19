# Summarizes alternated cairn-only BigFUN runs: python3 summarize_bigfun.py bigfun base delta
import json,glob,statistics as st,sys,math
root,a,b=sys.argv[1:4]
def load(p):
    s=json.load(open(glob.glob(p+'/raw/*.json')[0]))['systems'][0]
    med={}
    for c in s['cases']:
        xs=[r['seconds'] for r in c['runs'] if not r.get('warmup') and r.get('error') is None]
        if xs: med[c['label']]=st.median(xs)
    return s,med
def runs(prefix):
    return [load(p) for p in sorted(glob.glob(f'{root}/{prefix}[0-9]'))]
A=runs(a); B=runs(b)
print('size', a, [s['size_bytes'] for s,_ in A], b, [s['size_bytes'] for s,_ in B])
print('setup', a, [[round(x['seconds'],1) for x in s['setup']] for s,_ in A], b, [[round(x['seconds'],1) for x in s['setup']] for s,_ in B])
labels=list(A[0][1].keys())
logs=[]
print(f"| operation | {a} (ms) | {b} (ms) | {b}/{a} |\n|---|---:|---:|---:|")
for l in labels:
    ma=st.median([m[l] for _,m in A if l in m]); mb=st.median([m[l] for _,m in B if l in m])
    logs.append(math.log(mb/ma))
    print(f"| {l} | {ma*1000:.2f} | {mb*1000:.2f} | {mb/ma:.2f} |")
print("geomean ratio", round(math.exp(sum(logs)/len(logs)),3), "over", len(logs))

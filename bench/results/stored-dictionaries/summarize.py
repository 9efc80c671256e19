import json,glob,statistics as st,sys
root=sys.argv[1]; a=sys.argv[2]; b=sys.argv[3]
def get(p):
    return json.load(open(glob.glob(p+'/raw/*.json')[0]))['systems'][0]
def per(prefix):
    runs=[get(r) for r in sorted(glob.glob(f'{root}/{prefix}[0-9]'))]
    # per run: reported value = mean of runs 2..3 (protocol)
    vals=[[st.mean(q[1:]) for q in s['seconds']] for s in runs]
    return runs, vals
ra,A=per(a); rb,B=per(b)
print("bytes", a, [r['bytes'] for r in ra], b, [r['bytes'] for r in rb])
print("load", a, [round(r['load_seconds'],1) for r in ra], b, [round(r['load_seconds'],1) for r in rb])
ta=[sum(v) for v in A]; tb=[sum(v) for v in B]
print("totals", a, [round(x,3) for x in ta], b, [round(x,3) for x in tb])
print("median totals", round(st.median(ta),3), round(st.median(tb),3))
for i in range(22):
    ma=st.median([v[i] for v in A]); mb=st.median([v[i] for v in B])
    print(f"Q{i+1:<3} {ma*1000:7.1f} {mb*1000:7.1f}  x{mb/ma:.2f}")

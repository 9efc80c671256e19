import json,sys,re
d=json.load(open('/work/main/bench/results/bigfun-1000000-with-duckdb-2026-11-27/raw/bigfun-1000000.json'))
label=sys.argv[1]; reps=int(sys.argv[2])
c=[c for c in d['plan'] if c['label']==label][0]
op=c['case']['operation']
ix=c['case'].get('with_author_index')
text=open(f'/work/main/bench/bigfun/queries/cairn/Q{int(op[1:]):02d}.sql').read()
text='\n'.join(l for l in text.splitlines() if not l.startswith('--'))
out=[]
for r in range(reps):
  for run in c['runs']:
    s=text
    for k,v in run['parameters']['values'].items(): s=s.replace('{{'+k+'}}',str(v))
    out.append(s.strip()+';')
print('\n'.join(out))

#!/bin/bash
# usage: pairs.sh BIN SETTING N — runs each of the 22 queries N times with `SET SETTING = true` and
# `= false` alternately in one shell; prints per-query medians (ms) on, off, ratio, and totals
bin=$1; setting=$2; n=${3:-5}
{ for q in $(seq -w 1 22); do for i in $(seq $n); do echo "SET $setting = true;"; cat /tmp/r$q.sql; echo; echo "SET $setting = false;"; cat /tmp/r$q.sql; echo; done; done; } | $bin --data ${DB} shell 2>&1 | grep -o "rows\?, [0-9.]* ms" | awk '{print $2}' > /tmp/pairs.out
python3 - "$n" <<'PY'
import sys,statistics as st
n=int(sys.argv[1]); v=[float(x) for x in open('/tmp/pairs.out')]
assert len(v)==22*2*n, len(v)
ton=toff=0
for q in range(22):
    w=v[q*2*n:(q+1)*2*n]; on=st.median(w[0::2]); off=st.median(w[1::2]); ton+=on; toff+=off
    print(f"Q{q+1:<3}{on:8.1f}{off:8.1f}  x{on/off:.2f}")
print(f"total {ton:8.1f}{toff:8.1f}  x{ton/toff:.3f}")
PY

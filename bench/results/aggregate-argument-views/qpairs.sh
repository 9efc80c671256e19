#!/bin/bash
# qpairs.sh BIN SETTING N FILE: alternating on/off pairs of one query in one process; prints medians on, off, ratio
bin=$1; setting=$2; n=$3; f=$4
for i in $(seq $n); do
  if [ $((i%2)) = 0 ]; then a=true; b=false; else a=false; b=true; fi
  echo "SET $setting = $a;"; cat $f; echo; echo "SET $setting = $b;"; cat $f; echo
done | $bin --data ${DB:-/tmp/tpchv/tpch-cairn-sf1} shell 2>&1 | grep -o "rows\?, [0-9.]* ms" | awk '{print $2}' | python3 -c "
import sys,statistics as st
v=[float(x) for x in sys.stdin.read().split()]
on=[];off=[]
for i in range(len(v)//2):
    p=v[2*i:2*i+2]
    if (i+1)%2==0: on.append(p[0]); off.append(p[1])
    else: off.append(p[0]); on.append(p[1])
print('on %.1f off %.1f ratio %.3f'%(st.median(on),st.median(off),st.median(on)/st.median(off)))
"

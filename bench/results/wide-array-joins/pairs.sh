#!/bin/bash
# Times a Cairn on/off setting against TPC-H inside one process: runs each of the 22 queries N
# times with `SET SETTING = true` and N times with `= false`, in pairs whose order alternates,
# in one `cairn shell`,
# and prints per-query medians (ms) on, off, their ratio, and the totals.
# usage: pairs.sh BIN SETTING N WORK_DIR
#   WORK_DIR is a `cairn bench tpch --sf 1 --work-dir WORK_DIR` directory: its Cairn database
#   (tpch-cairn-sf1) and the benchmark's query texts (tpch-queries.json).
set -euo pipefail
bin=$1; setting=$2; n=$3; work=$4
out=$(mktemp)
python3 - "$setting" "$n" "$work/tpch-queries.json" <<'PY' | "$bin" --data "$work/tpch-cairn-sf1" shell 2>&1 | grep -o "rows\?, [0-9.]* ms" | awk '{print $2}' > "$out"
import json, sys
setting, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for query in json.load(open(path)):
    for i in range(n):
        # Alternate which goes first, so that neither always meets a query's first planning.
        for value in (("true", "false") if i % 2 == 0 else ("false", "true")):
            print(f"SET {setting} = {value};")
            print(query["text"])
PY
python3 - "$n" "$out" <<'PY'
import sys, statistics as st
n = int(sys.argv[1]); v = [float(x) for x in open(sys.argv[2])]
assert len(v) == 22 * 2 * n, len(v)
ton = toff = 0
for q in range(22):
    w = v[q * 2 * n:(q + 1) * 2 * n]
    pairs = [w[2 * i:2 * i + 2] if i % 2 == 0 else w[2 * i:2 * i + 2][::-1] for i in range(n)]
    on = st.median(p[0] for p in pairs); off = st.median(p[1] for p in pairs)
    ton += on; toff += off
    print(f"Q{q+1:<3}{on:8.1f}{off:8.1f}  x{on/off:.2f}")
print(f"total {ton:8.1f}{toff:8.1f}  x{ton/toff:.3f}")
PY
rm -f "$out"

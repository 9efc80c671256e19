#!/usr/bin/env bash
# Alternated A/B of two cairn binaries on the TPC-H queries: for each query, a script of the
# query 5 times is run by one process of each binary in turn, ROUNDS times; prints the wall
# seconds of every process. Usage: alternate.sh OLD NEW DATA QUERIES_JSON [ROUNDS]
set -euo pipefail
old=$1 new=$2 data=$3 queries=$4 rounds=${5:-3}
scripts=$(mktemp -d)
python3 - "$queries" "$scripts" <<'PY'
import json, sys
for q in json.load(open(sys.argv[1])):
    open(f"{sys.argv[2]}/q{q['number']}.sql", "w").write(q["text"] * 5)
PY
for n in $(seq 1 22); do
  for round in $(seq 1 "$rounds"); do
    for side in old new; do
      binary=$old; [ "$side" = new ] && binary=$new
      seconds=$( { /usr/bin/time -f "%e" "$binary" --data "$data" sql -f "$scripts/q$n.sql" > /dev/null; } 2>&1 )
      echo "Q$n $side $round $seconds"
    done
  done
done
rm -r "$scripts"

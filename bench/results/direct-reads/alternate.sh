#!/usr/bin/env bash
# Runs each loop script under two cairn binaries in turn, ROUNDS times, printing wall and user
# seconds per process (README.md beside this file says what was run and what it showed).
#   alternate.sh BASE_BINARY NEW_BINARY DATA_DIR ROUNDS SCRIPT...
set -euo pipefail
base="$1" new="$2" data="$3" rounds="$4"
shift 4
for round in $(seq 1 "$rounds"); do
    for script in "$@"; do
        for binary in "$base" "$new"; do
            /usr/bin/time -f "$round $(basename "$script" .sql) $(basename "$binary") %e s wall %U s user" \
                "$binary" --data "$data" sql -f "$script" --format csv > /dev/null
        done
    done
done

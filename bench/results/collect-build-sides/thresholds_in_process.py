"""TPC-H's 22 queries with DataFusion's collect-the-build-side limits against larger ones, in one
`cairn shell`: for each query, 5 runs under DataFusion's limits, then 5 under the given ones,
twice; prints the median of the two blocks' medians per query (ms) and the ratio.

Usage: python3 thresholds_in_process.py CAIRN_BINARY WORK_DIR BYTES ROWS
WORK_DIR is a `cairn bench tpch --work-dir` (it holds tpch-queries.json, the queries with
this run's parameters, and the Cairn database tpch-cairn-sf1).
"""

import json
import re
import statistics
import subprocess
import sys

binary, work_dir, high_bytes, high_rows = sys.argv[1:5]
RUNS, ALTERNATIONS = 5, 2


def limits(bytes_max, rows_max):
    return (
        f"SET datafusion.optimizer.hash_join_single_partition_threshold = {bytes_max};\n"
        f"SET datafusion.optimizer.hash_join_single_partition_threshold_rows = {rows_max};\n"
    )


queries = json.load(open(f"{work_dir}/tpch-queries.json"))
script = ""
for query in queries:
    sql = query["text"].strip() + "\n"
    for _ in range(ALTERNATIONS):
        script += limits(1048576, 131072) + sql * RUNS + limits(high_bytes, high_rows) + sql * RUNS
out = subprocess.run(
    [binary, "--data", f"{work_dir}/tpch-cairn-sf1", "shell"],
    input=script,
    capture_output=True,
    text=True,
).stdout
# SET statements report no timing line; every query does.
times = [float(t) for t in re.findall(r"rows?, ([0-9.]+) ms", out)]
assert len(times) == len(queries) * ALTERNATIONS * 2 * RUNS, len(times)
position, totals = 0, [0.0, 0.0]
for query in queries:
    blocks = [[], []]
    for _ in range(ALTERNATIONS):
        for side in (0, 1):
            blocks[side].append(statistics.median(times[position : position + RUNS]))
            position += RUNS
    default, high = (statistics.median(b) for b in blocks)
    totals[0] += default
    totals[1] += high
    print(f"Q{query['number']:<3} {default:7.1f} {high:7.1f} x{high / default:.2f}")
print("total", round(totals[0]), round(totals[1]))

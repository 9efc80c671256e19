"""Writes the SQL of one BigFUN case's recorded runs, REPS times over, for profiling loops.

Usage: python3 render_runs.py LABEL REPS > script.sql   (LABEL as in the report: Q7-S, Q1, Q14-IX-M)
"""
import json
import pathlib
import sys

results = pathlib.Path(__file__).resolve().parent.parent
queries = results.parent / "bigfun" / "queries" / "cairn"
plan = json.load(open(results / "bigfun-1000000-with-duckdb-2026-11-27" / "raw" / "bigfun-1000000.json"))["plan"]

label, reps = sys.argv[1], int(sys.argv[2])
case = next(c for c in plan if c["label"] == label)
operation = case["case"]["operation"]
template = (queries / f"Q{int(operation[1:]):02d}.sql").read_text()
template = "\n".join(line for line in template.splitlines() if not line.startswith("--"))
statements = []
for _ in range(reps):
    for run in case["runs"]:
        text = template
        for name, value in run["parameters"]["values"].items():
            text = text.replace("{{" + name + "}}", str(value))
        statements.append(text.strip() + ";")
print("\n".join(statements))

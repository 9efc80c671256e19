"""Writes the SQL of one BigFUN case's recorded runs, REPS times over, for profiling loops.

Usage: python3 render_runs.py LABEL REPS [RAW_JSON] > script.sql
  LABEL as in the report (Q7-S, Q1, Q14-IX-M); RAW_JSON a run's raw/bigfun-<users>.json, by
  default the run the profiles in README.md used.
"""
import json
import pathlib
import sys

results = pathlib.Path(__file__).resolve().parent.parent
queries = results.parent / "bigfun" / "queries" / "cairn"
default_raw = results / "bigfun-1000000-with-duckdb-2026-11-27" / "raw" / "bigfun-1000000.json"

label, reps = sys.argv[1], int(sys.argv[2])
raw = pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else default_raw
plan = json.load(open(raw))["plan"]
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

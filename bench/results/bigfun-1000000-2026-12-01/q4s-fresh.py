"""Writes 600 BigFUN Q4-S statements with fresh user_since windows (seeded), each as wide as
the median window of this run's Q4-S parameters, for timing loops: python3 q4s-fresh.py > q4s-fresh.sql"""
import datetime
import json
import pathlib
import random

here = pathlib.Path(__file__).resolve().parent
queries = here.parent.parent / "bigfun" / "queries" / "cairn"
raw = json.load(open(here / "raw" / "bigfun-1000000.json"))
case = next(c for c in raw["plan"] if c["label"] == "Q4-S")
f = "%Y-%m-%dT%H:%M:%S"
windows = [
    (datetime.datetime.strptime(r["parameters"]["values"]["lo"], f),
     datetime.datetime.strptime(r["parameters"]["values"]["hi"], f))
    for r in case["runs"]
]
width = sorted(hi - lo for lo, hi in windows)[len(windows) // 2]
first, last = datetime.datetime(2000, 1, 1), datetime.datetime(2014, 8, 1)
template = "\n".join(
    line for line in (queries / "Q04.sql").read_text().splitlines() if not line.startswith("--")
)
rnd = random.Random(3)
statements = []
for _ in range(600):
    lo = first + datetime.timedelta(seconds=rnd.uniform(0, (last - first - width).total_seconds()))
    text = template.replace("{{lo}}", lo.strftime(f)).replace("{{hi}}", (lo + width).strftime(f))
    statements.append(text.strip() + ";")
print("\n".join(statements))

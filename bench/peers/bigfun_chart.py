"""Draws the BigFUN report's chart: median time per operation-version and system, log scale.

Usage: python bigfun_chart.py RAW.json OUT.png  (RAW.json is what `cairn-bench bigfun` writes
under bench/results/raw/).
"""

import json
import statistics
import sys

from bar_chart import draw_grouped_bars


def median_seconds(case):
    """The median of a case's measured runs; None if any failed, timed out or had no answer."""
    runs = [r for r in (case or {}).get("runs", []) if not r["warmup"]]
    if not runs or any(r.get("timed_out") or r.get("error") for r in runs):
        return None
    if not all("checksum" in r or "rows" in r for r in runs):
        return None
    return statistics.median(r["seconds"] for r in runs)


def main() -> None:
    raw_path, out_path = sys.argv[1], sys.argv[2]
    with open(raw_path) as f:
        report = json.load(f)
    labels = [p["label"] for p in report["plan"] if not p["label"].startswith("U")]
    systems = [s for s in report["systems"] if s["status"] == "ran"]
    series = []
    for system in systems:
        cases = {c["label"]: c for c in system["cases"]}
        series.append((system["system"], [median_seconds(cases.get(label)) for label in labels]))
    draw_grouped_bars(
        out_path,
        labels,
        series,
        "median seconds (log scale)",
        f"BigFUN, {report['users']:,} users: median time per operation",
        figsize=(max(10, len(labels) * 0.32), 5.5),
        tick_rotation=70,
        tick_size=7,
    )


if __name__ == "__main__":
    main()

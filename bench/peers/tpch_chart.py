"""Draws the TPC-H report's chart: seconds per query for each system (the mean of the runs
after the first, as the report's table gives them), on a log scale, in the manner of the
AsterixDB thesis's Table 4.8 drawn as bars.

Usage: python tpch_chart.py RAW.json OUT.png  (RAW.json is what `cairn bench tpch` writes under
bench/results/raw/).
"""

import json
import sys

from bar_chart import draw_grouped_bars


def measured(runs):
    """The mean of the runs after the first; None if any run failed."""
    kept = runs[1:] if len(runs) > 1 else runs
    if not kept or any(r is None for r in kept):
        return None
    return sum(kept) / len(kept)


def main() -> None:
    raw_path, out_path = sys.argv[1], sys.argv[2]
    with open(raw_path) as f:
        report = json.load(f)
    queries = len(report["queries"])
    series = [
        (f"{system['system']} {system['version']}", [measured(runs) for runs in system["seconds"]])
        for system in report["systems"]
    ]
    draw_grouped_bars(
        out_path,
        [f"Q{q}" for q in range(1, queries + 1)],
        series,
        "seconds (log scale)",
        f"TPC-H SF {report['scale_factor']}: seconds per query, runs after the first",
        figsize=(14, 5),
    )


if __name__ == "__main__":
    main()

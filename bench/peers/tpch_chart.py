"""Draws the TPC-H report's chart: seconds per query for each system (the mean of the runs
after the first, as the report's table gives them), on a log scale, in the manner of the
AsterixDB thesis's Table 4.8 drawn as bars.

Usage: python tpch_chart.py RAW.json OUT.png  (RAW.json is what `cairn bench tpch` writes under
bench/results/raw/).
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
    systems = report["systems"]
    queries = len(report["queries"])
    width = 0.8 / max(len(systems), 1)
    fig, axis = plt.subplots(figsize=(14, 5))
    for index, system in enumerate(systems):
        xs, ys = [], []
        for query in range(queries):
            seconds = measured(system["seconds"][query])
            if seconds is not None:
                xs.append(query + 1 + (index - (len(systems) - 1) / 2) * width)
                ys.append(seconds)
        axis.bar(xs, ys, width=width, label=f"{system['system']} {system['version']}")
    axis.set_yscale("log")
    axis.set_xticks(range(1, queries + 1))
    axis.set_xticklabels([f"Q{q}" for q in range(1, queries + 1)])
    axis.set_ylabel("seconds (log scale)")
    axis.set_title(f"TPC-H SF {report['scale_factor']}: seconds per query, runs after the first")
    axis.legend()
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)


if __name__ == "__main__":
    main()

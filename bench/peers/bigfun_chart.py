"""Draws the BigFUN report's chart: median time per operation-version and system, log scale.

Usage: python bigfun_chart.py RAW.json OUT.png  (RAW.json is what `cairn-bench bigfun` writes
under bench/results/raw/).
"""

import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    raw_path, out_path = sys.argv[1], sys.argv[2]
    with open(raw_path) as f:
        report = json.load(f)
    labels = [p["label"] for p in report["plan"] if not p["label"].startswith("U")]
    systems = [s for s in report["systems"] if s["status"] == "ran"]
    fig, ax = plt.subplots(figsize=(max(10, len(labels) * 0.32), 5.5))
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        cases = {c["label"]: c for c in system["cases"]}
        xs, ys = [], []
        for x, label in enumerate(labels):
            runs = [r for r in cases.get(label, {}).get("runs", []) if not r["warmup"]]
            if runs and all("checksum" in r or "rows" in r for r in runs) and not any(
                r.get("timed_out") or r.get("error") for r in runs
            ):
                xs.append(x + i * width)
                ys.append(statistics.median(r["seconds"] for r in runs))
        ax.bar(xs, ys, width=width, label=system["system"])
    ax.set_yscale("log")
    ax.set_ylabel("median seconds (log scale)")
    ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(labels))])
    ax.set_xticklabels(labels, rotation=70, fontsize=7)
    ax.set_title(f"BigFUN, {report['users']:,} users: median time per operation")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)


if __name__ == "__main__":
    main()

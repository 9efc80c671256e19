"""Draws the server report's charts after the result-distribution thesis's Figures 5.1-5.5:
Q_small and Q_large response times and throughput against the number of clients, for
sequential and opportunistic reading and a buffered or spill-only result store; and the time
to the first row of a large result read as it is produced or after it is complete.

Usage: python server_chart.py RAW.json OUT.png  (RAW.json is what `cairn-bench server` writes
under bench/results/raw/).
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    raw_path, out_path = sys.argv[1], sys.argv[2]
    with open(raw_path) as f:
        report = json.load(f)
    mixed = report["mixed"]
    series = sorted({(m["store"], m["reading"]) for m in mixed})
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    panels = [
        (axes[0][0], "Q_small mean response (ms)", lambda m: m["small"]["mean_response_ms"]),
        (axes[0][1], "Q_large mean response (ms)", lambda m: m["large"]["mean_response_ms"]),
        (
            axes[1][0],
            "throughput (Q_small + Q_large per second)",
            lambda m: m["small"]["queries_per_second"] + m["large"]["queries_per_second"],
        ),
    ]
    for ax, title, value in panels:
        for store, reading in series:
            points = sorted(
                (m["clients_per_stream"], value(m))
                for m in mixed
                if m["store"] == store and m["reading"] == reading
            )
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                label=f"{store}, {reading}",
            )
        ax.set_title(title)
        ax.set_xlabel("clients per stream")
        ax.set_xticks(sorted({m["clients_per_stream"] for m in mixed}))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[1][1]
    streaming = report["streaming"]
    labels = [f"{s['format']}\n{s['mode']}" for s in streaming]
    ax.bar(range(len(streaming)), [max(s["first_row_ms"], 0.01) for s in streaming])
    ax.set_yscale("log")
    ax.set_xticks(range(len(streaming)))
    ax.set_xticklabels(labels, fontsize=7)
    rows = streaming[0]["rows"] if streaming else 0
    ax.set_title(f"time to first row of a {rows:,}-row result (ms, log)")
    ax.grid(alpha=0.3, axis="y")
    fig.suptitle(
        f"Cairn result distribution: supplier {report['rows']:,} rows x {report['replicas']} replicas"
    )
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)


if __name__ == "__main__":
    main()

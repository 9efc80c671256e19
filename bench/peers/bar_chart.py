"""Grouped bar charts on a log scale, one bar per system for each label: the shape of the
BigFUN and TPC-H report charts.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def draw_grouped_bars(out_path, labels, series, ylabel, title, figsize, tick_rotation=0, tick_size=None):
    """`series` is [(name, [seconds or None per label])]; a None leaves its bar out."""
    width = 0.8 / max(1, len(series))
    fig, axis = plt.subplots(figsize=figsize)
    for index, (name, values) in enumerate(series):
        offset = (index - (len(series) - 1) / 2) * width
        bars = [(x + offset, v) for x, v in enumerate(values) if v is not None]
        axis.bar([x for x, _ in bars], [v for _, v in bars], width=width, label=name)
    axis.set_yscale("log")
    axis.set_ylabel(ylabel)
    axis.set_xticks(range(len(labels)))
    axis.set_xticklabels(labels, rotation=tick_rotation, fontsize=tick_size)
    axis.set_title(title)
    axis.legend()
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)

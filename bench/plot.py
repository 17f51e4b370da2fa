"""Draw the bench chart. Runs in bench/.venvs/plot (matplotlib, from bench/requirements.txt):

    bench/.venvs/plot/bin/python bench/plot.py SERIES.json OUT.png

SERIES.json is written by bench/report.py (chart_series): peers, and panels of metric groups,
each value a [median, min, max] triple or null.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(series_path: str, out_png: str) -> None:
    with open(series_path) as f:
        series = json.load(f)
    peers = series["peers"]
    panels = series["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), 5.0), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, panel in zip(axes[0], panels, strict=False):
        groups = panel["groups"]
        width = 0.8 / max(1, len(peers))
        for pi, peer in enumerate(peers):
            xs, meds, lo, hi = [], [], [], []
            for gi, group in enumerate(groups):
                v = group["values"][pi]
                if v is None:
                    continue
                med, vmin, vmax = v
                xs.append(gi - 0.4 + width * (pi + 0.5))
                meds.append(med)
                lo.append(med - vmin)
                hi.append(vmax - med)
            if xs:
                ax.bar(
                    xs,
                    meds,
                    width,
                    yerr=[lo, hi],
                    capsize=2,
                    error_kw={"elinewidth": 0.8, "ecolor": "#444"},
                    label=peer,
                    color=colors[pi % len(colors)],
                    edgecolor="black" if peer.startswith("akadze") else None,
                    linewidth=1.2 if peer.startswith("akadze") else 0,
                )
                for x, m, top in zip(xs, meds, hi, strict=True):
                    ax.annotate(
                        f"{m:,.0f}" if m >= 100 else f"{m:.1f}",
                        (x, m + top),
                        xytext=(0, 2),
                        textcoords="offset points",
                        ha="center",
                        va="bottom",
                        fontsize=6,
                        rotation=90,
                    )
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g["name"] for g in groups])
        ax.set_title(panel["title"], fontsize=10)
        if panel["log"]:
            ax.set_yscale("log")
            ax.margins(y=0.25)  # room for the labels above the bars
        ax.grid(axis="y", alpha=0.3, which="both")
        ax.set_axisbelow(True)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(peers), 6), fontsize=9, frameon=False)
    fig.suptitle(series.get("title", ""), fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(out_png, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The paper's figures as PNGs, from their numbers (eval/figures.py): one panel per benchmark.

Swept figures (iterations, thumbnail resolution, runs) draw each series as a line with bootstrap std
error bars over x; the GIANT-vs-random figure draws bars per benchmark. The paper's points are grey
squares (or hatched bars) labelled "(paper)". A figure with no point of ours still draws the paper's
points and says "no experiment of ours run yet"; a benchmark with no point has no panel.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from giant_assets.benchmarks.registry import ordered  # noqa: E402
from giant_assets.eval.figures import FIGURES  # noqa: E402

PANEL_IN = 3.2  # inches per benchmark panel
DPI = 100
PAPER_STYLE = {"color": "0.45", "marker": "s", "linestyle": "none", "markersize": 7}


def figure_of(points: pd.DataFrame, figure: str) -> Figure:
    """The figure ``figure`` from its rows of ``points`` (eval.figures.COLUMNS)."""
    mine = points[points["figure"] == figure]
    present = set(mine["benchmark_name"])
    benchmarks = ordered(present) or ["(none)"]
    title, xlabel = FIGURES[figure]
    fig = plt.figure(figsize=(PANEL_IN * len(benchmarks) + 2.5, 3.6), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(benchmarks), squeeze=False)[0]
    for ax, benchmark in zip(axes, benchmarks, strict=True):
        cells = mine[mine["benchmark_name"] == benchmark]
        if figure == "giant_vs_random":
            _bars(ax, cells, mine)
        else:
            _lines(ax, cells)
        ax.set_title(benchmark, fontsize=9)
        ax.set_ylim(0, 100)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("accuracy (%): bootstrap mean ± std", fontsize=8)
    if not (mine["source"] == "ours").any():
        title += " (no experiment of ours run yet)"
    fig.suptitle(title, fontsize=10)
    handles, labels = [], []
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False)
    return fig


def _lines(ax, cells: pd.DataFrame) -> None:
    palette = plt.get_cmap("tab10")
    ours = cells[cells["source"] == "ours"]
    for k, (series, group) in enumerate(ours.groupby("series", sort=True)):
        group = group.sort_values("x")
        ax.errorbar(group["x"], group["mean"], yerr=group["std"], marker="o", capsize=3, linewidth=1,
                    color=palette(k % 10), label=series)  # fmt: skip
    for series, group in cells[cells["source"] != "ours"].groupby("series", sort=True):
        ax.errorbar(group["x"], group["mean"], yerr=group["std"], capsize=3, label=f"{series} (paper)",
                    **PAPER_STYLE)  # fmt: skip
    xs: list[float] = []
    for x in sorted(set(cells["x"].dropna())):  # a tick too close to the last one would overprint it
        if not xs or x - xs[-1] > 0.04 * max(cells["x"]):
            xs.append(x)
    if xs:
        ax.set_xticks(xs, [f"{x:g}" for x in xs], rotation=45 if len(xs) > 5 else 0)


def _bars(ax, cells: pd.DataFrame, whole: pd.DataFrame) -> None:
    """Bars per x label (GIANT, random regions), one per series (ours first), placed alike in every
    panel (``whole``: the figure's rows)."""
    paper = whole["source"] != "ours"
    groups = sorted(dict.fromkeys(zip(paper, whole["series"], strict=True)))  # ours (False) first
    labels = sorted(dict.fromkeys(whole["x_label"]), key=lambda v: v != "GIANT")
    width = 0.8 / max(1, len(groups))
    palette = plt.get_cmap("tab10")
    for k, (is_paper, series) in enumerate(groups):
        rows = cells[((cells["source"] != "ours") == is_paper) & (cells["series"] == series)]
        if rows.empty:
            continue
        x = np.array([labels.index(v) for v in rows["x_label"]], dtype=float) - 0.4 + (k + 0.5) * width
        style = (
            {"color": "0.6", "hatch": "//", "edgecolor": "black"} if is_paper else {"color": palette(k % 10)}
        )
        ax.bar(x, rows["mean"], width=width, yerr=rows["std"], capsize=2,
               label=f"{series} (paper)" if is_paper else series, **style)  # fmt: skip
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_xlim(-0.5, len(labels) - 0.5)


def write_figures(points: pd.DataFrame, out_dir: Path) -> dict[str, Path]:
    """Every figure as ``<out_dir>/<figure>.png`` and the numbers as ``<out_dir>/paper_figures.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for figure in FIGURES:
        fig = figure_of(points, figure)
        try:
            fig.savefig(out_dir / f"{figure}.png")
        finally:
            plt.close(fig)
        paths[figure] = out_dir / f"{figure}.png"
    points.to_csv(out_dir / "paper_figures.csv", index=False)
    return paths

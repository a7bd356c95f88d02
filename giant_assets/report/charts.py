"""Charts as PNGs: the leaderboard (experiments x benchmarks, bootstrap mean ± std error bars)."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from PIL import Image  # noqa: E402

from giant_assets.benchmarks.registry import ordered  # noqa: E402

LEADERBOARD_SIZE_IN = (12.0, 5.0)  # inches at LEADERBOARD_DPI: 1200 x 500 px, plus the legend's rows
LEADERBOARD_DPI = 100
LEGEND_ROW_IN = 0.2  # the figure grows by this per row of the legend (below the bars, never clipped)
LEGEND_CHAR_IN = 0.065  # a legend label's width per character at its font size (8 pt), generously
PAPER_HATCH = "//"
INLINE_COLORS = 48  # the chart inside the leaderboard's metadata (a data: URI): ~30-40 KB for 1200 x 500


def _series(long_table: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(experiment, source, its known cells) in table order: ours first, then the paper's rows."""
    known = long_table[long_table["mean"].notna()]
    keys = dict.fromkeys(zip(known["experiment"], known["source"], strict=True))
    keys = sorted(keys, key=lambda k: k[1] != "ours")  # stable: keeps the table's order within a source
    return [
        (name, source, known[(known["experiment"] == name) & (known["source"] == source)])
        for name, source in keys
    ]


def leaderboard_figure(long_table: pd.DataFrame) -> Figure:
    """Grouped bars: benchmarks on x, one bar per experiment (height = mean, error bar = std).

    ``long_table`` is the leaderboard's long form (experiment, source, benchmark_name, mean, std). Our
    experiments are solid colours; the paper's rows are grey with hatching and "(paper)" in the legend.
    Unknown cells have no bar. Each experiment is one BarContainer labelled as in the legend.
    """
    benchmarks = ordered(long_table["benchmark_name"])
    position = {name: i for i, name in enumerate(benchmarks)}
    series = _series(long_table)
    width = 0.84 / max(1, len(series))
    ours = plt.get_cmap("tab10")
    greys = plt.get_cmap("Greys")
    n_paper = sum(source != "ours" for _, source, _ in series)
    columns, rows = _legend_grid(series)
    fig_w, fig_h = LEADERBOARD_SIZE_IN
    fig = plt.figure(figsize=(fig_w, fig_h + rows * LEGEND_ROW_IN), dpi=LEADERBOARD_DPI, layout="constrained")
    ax = fig.add_subplot()
    k_ours = k_paper = 0
    for k, (name, source, cells) in enumerate(series):
        x = cells["benchmark_name"].map(position).to_numpy(dtype=float) - 0.42 + (k + 0.5) * width
        style: dict = {"label": name, "color": ours(k_ours % 10)}
        if source == "ours":
            k_ours += 1
        else:
            shade = 0.35 + 0.45 * k_paper / max(1, n_paper - 1)
            style = {
                "label": f"{name} (paper)",
                "color": greys(shade),
                "hatch": PAPER_HATCH,
                "edgecolor": "black",
            }
            k_paper += 1
        ax.bar(
            x,
            cells["mean"].to_numpy(dtype=float),
            width=width,
            yerr=cells["std"].fillna(0).to_numpy(dtype=float),
            capsize=2,
            linewidth=0.5,
            error_kw={"elinewidth": 0.8},
            **style,
        )
    ax.set_xticks(np.arange(len(benchmarks)), benchmarks)
    ax.set_xlim(-0.5, len(benchmarks) - 0.5)
    ax.set_ylim(0, 100)
    ax.set_ylabel("score (%): bootstrap mean ± std")
    ax.set_title("MultiPathQA leaderboard: our experiments and the paper's rows")
    if series:  # below the bars in as many columns as the widest label allows: any number of rows fits
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.07), ncols=columns, fontsize=8, frameon=False)
    return fig


def _legend_grid(series: list[tuple[str, str, pd.DataFrame]]) -> tuple[int, int]:
    """(columns, rows) of the legend: columns as wide as its longest label, as many as fit the width."""
    if not series:
        return 1, 0
    longest = max(len(name) + (0 if source == "ours" else 8) for name, source, _ in series)
    column_in = 0.5 + longest * LEGEND_CHAR_IN  # the swatch, the gap and the text
    columns = max(1, min(len(series), int((LEADERBOARD_SIZE_IN[0] - 0.4) // column_in)))
    return columns, -(-len(series) // columns)


def leaderboard_chart_png(long_table: pd.DataFrame, path: Path) -> Path:
    """The leaderboard chart (see :func:`leaderboard_figure`) saved as a PNG of LEADERBOARD_SIZE_IN."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = leaderboard_figure(long_table)
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def png_markdown(path: Path, alt: str, colors: int = INLINE_COLORS) -> str:
    """Markdown showing the PNG at ``path`` with the image inside it (a ``data:`` URI), so it renders
    wherever the text goes (Dagster's UI resolves a file path against its own host). Reduced to a
    palette of ``colors`` to stay small: a chart's flat colours and text survive it."""
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=colors)
    buffer = io.BytesIO()
    small.save(buffer, format="PNG", optimize=True)
    return f"![{alt}](data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode('ascii')})"

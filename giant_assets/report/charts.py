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

from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES  # noqa: E402

LEADERBOARD_SIZE_IN = (12.0, 5.0)  # inches at LEADERBOARD_DPI: a 1200 x 500 px PNG
LEADERBOARD_DPI = 100
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
    benchmarks = [b for b in BENCHMARK_NAMES if b in set(long_table["benchmark_name"])]
    position = {name: i for i, name in enumerate(benchmarks)}
    series = _series(long_table)
    width = 0.84 / max(1, len(series))
    ours = plt.get_cmap("tab10")
    greys = plt.get_cmap("Greys")
    n_paper = sum(source != "ours" for _, source, _ in series)
    fig = plt.figure(figsize=LEADERBOARD_SIZE_IN, dpi=LEADERBOARD_DPI, layout="constrained")
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
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    return fig


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

"""A bar chart of scores per benchmark, ours beside the paper's GPT-5 + GIANT, as a PNG."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _paper_mean(text: str | None) -> float:
    return float(text.split("±")[0]) if isinstance(text, str) else np.nan


def bar_chart_png(table: pd.DataFrame, path: Path) -> Path:
    """Bars: bootstrap mean ± std of this run; markers: the paper's GPT-5 + GIANT mean."""
    path.parent.mkdir(parents=True, exist_ok=True)
    x = np.arange(len(table))
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.bar(
        x,
        table["boot_mean_pct"].fillna(0),
        yerr=table["boot_std_pct"].fillna(0),
        capsize=4,
        color="#8e5ea2",
        label="this run (bootstrap mean ± std)",
    )
    ax.scatter(
        x,
        [_paper_mean(t) for t in table["paper_giant"]],
        color="black",
        marker="D",
        zorder=3,
        label="paper: GPT-5 + GIANT",
    )
    ax.set_xticks(x, table["benchmark_name"], rotation=15)
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 100)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("MultiPathQA: score per benchmark")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path

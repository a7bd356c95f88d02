"""Charts: the leaderboard's bars and error bars are the table's numbers; PNGs decode at the stated size."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer
from PIL import Image

from giant_assets.eval.leaderboard import leaderboard_long
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.report.charts import (
    LEADERBOARD_DPI,
    LEADERBOARD_SIZE_IN,
    LEGEND_ROW_IN,
    PAPER_HATCH,
    leaderboard_chart_png,
    leaderboard_figure,
    png_markdown,
)


def long_table() -> pd.DataFrame:
    rng = np.random.default_rng(8)
    rows = [
        {
            "experiment": name,
            "benchmark_name": benchmark,
            "n_items": 10,
            "n_slide_readable": 10,
            "boot_mean_pct": float(rng.uniform(5, 90)),
            "boot_std_pct": float(rng.uniform(0.5, 5)),
            "cost_usd": 0.0,
        }
        for name in ("random", "gpt5-giant")
        for benchmark in BENCHMARK_NAMES
        if not (name == "random" and benchmark == "panda")  # a benchmark this experiment has not run
    ]
    return leaderboard_long(pd.DataFrame(rows))


def bars_by_label(fig) -> dict[str, BarContainer]:
    (ax,) = fig.axes
    return {c.get_label(): c for c in ax.containers if isinstance(c, BarContainer)}


def test_every_bar_and_error_bar_is_a_cell_of_the_long_table():
    table = long_table()
    fig = leaderboard_figure(table)
    try:
        bars = bars_by_label(fig)
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == list(BENCHMARK_NAMES)
        n_series = table[["experiment", "source"]].drop_duplicates().shape[0]
        assert len(bars) == n_series == 2 + 6
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        keys = dict.fromkeys(zip(table["experiment"], table["source"], strict=True))
        assert legend == [n if src == "ours" else f"{n} (paper)" for n, src in keys]
        assert legend[:3] == ["gpt5-giant", "random", "GPT-5 + GIANT (paper)"]
        for (name, source), cells in table.groupby(["experiment", "source"], sort=False):
            container = bars[name if source == "ours" else f"{name} (paper)"]
            assert len(container.patches) == len(cells)  # unknown cells have no bar
            centres = np.array([p.get_x() + p.get_width() / 2 for p in container.patches])
            slots = cells["benchmark_name"].map({b: i for i, b in enumerate(BENCHMARK_NAMES)}).to_numpy()
            assert np.all(np.abs(centres - slots) < 0.5)  # each bar sits in its benchmark's group
            np.testing.assert_allclose([p.get_height() for p in container.patches], cells["mean"], atol=1e-12)
            segments = container.errorbar.lines[2][0].get_segments()
            lows = [seg[0][1] for seg in segments]
            highs = [seg[1][1] for seg in segments]
            np.testing.assert_allclose(lows, cells["mean"] - cells["std"], atol=1e-12)
            np.testing.assert_allclose(highs, cells["mean"] + cells["std"], atol=1e-12)
            np.testing.assert_allclose([seg[0][0] for seg in segments], centres, atol=1e-12)
            hatches = {p.get_hatch() for p in container.patches}
            assert hatches == ({None} if source == "ours" else {PAPER_HATCH})
        assert len(bars["random"].patches) == 4 and len(bars["GPT-5 thumbnail (paper)"].patches) == 3
        ours_colours = {bars[n].patches[0].get_facecolor() for n in ("random", "gpt5-giant")}
        assert len(ours_colours) == 2
    finally:
        plt.close(fig)


def test_leaderboard_png_decodes_at_the_stated_size(tmp_path: Path):
    path = leaderboard_chart_png(long_table(), tmp_path / "charts" / "leaderboard.png")
    with Image.open(path) as image:
        image.load()
        assert image.format == "PNG"
        rows = 2  # 8 series, columns as the widest label allows: 5 then 3
        assert image.size == (
            round(LEADERBOARD_SIZE_IN[0] * LEADERBOARD_DPI),
            round((LEADERBOARD_SIZE_IN[1] + rows * LEGEND_ROW_IN) * LEADERBOARD_DPI),
        )
        pixels = np.asarray(image.convert("RGB"))
    assert pixels.std() > 10  # something is drawn, not a blank canvas
    assert plt.get_fignums() == []  # the figure was closed


@pytest.mark.parametrize("n_ours", [2, 40])
def test_the_legend_is_never_clipped(n_ours: int):
    """However many experiments (the paper's 11 rows beside 2 or 40 of ours, some long-named), every
    legend entry lies inside the saved image, and the bars keep their height."""
    rows = [
        {"experiment": f"experiment-{i}" + ("-with-a-long-descriptive-name" * (i % 3 == 0)), "source": "ours",
         "benchmark_name": b, "mean": 50.0, "std": 2.0}
        for i in range(n_ours) for b in BENCHMARK_NAMES
    ] + [
        {"experiment": f"Paper model {i} + GIANT", "source": "paper", "benchmark_name": b, "mean": 40.0,
         "std": 1.0}
        for i in range(11) for b in BENCHMARK_NAMES
    ]  # fmt: skip
    fig = leaderboard_figure(pd.DataFrame(rows))
    try:
        fig.canvas.draw()
        canvas = fig.bbox
        legend = fig.axes[0].get_legend()
        assert len(legend.get_texts()) == n_ours + 11
        for text in legend.get_texts():
            box = text.get_window_extent()
            inside = (
                canvas.x0 <= box.x0 and box.x1 <= canvas.x1 and canvas.y0 <= box.y0 and box.y1 <= canvas.y1
            )
            assert inside, text.get_text()
        bars = fig.axes[0].get_window_extent()
        assert bars.height >= 300 and bars.width >= 900  # the legend does not squeeze the bars
    finally:
        plt.close(fig)


def test_a_series_with_no_known_cell_gets_no_bars():
    table = long_table()
    table.loc[table["experiment"] == "random", "mean"] = np.nan
    fig = leaderboard_figure(table)
    try:
        assert "random" not in bars_by_label(fig)
    finally:
        plt.close(fig)


def test_inline_markdown_carries_the_chart_as_data(tmp_path: Path):
    path = leaderboard_chart_png(long_table(), tmp_path / "leaderboard.png")
    markdown = png_markdown(path, "leaderboard")
    prefix = "![leaderboard](data:image/png;base64,"
    assert markdown.startswith(prefix) and markdown.endswith(")")
    data = base64.b64decode(markdown[len(prefix) : -1], validate=True)
    assert len(data) < 60_000  # small enough for an event's metadata (the PNG itself: ~70 KB)
    with Image.open(io.BytesIO(data)) as inline, Image.open(path) as original:
        assert inline.format == "PNG" and inline.size == original.size
        inline_rgb = np.asarray(inline.convert("RGB"), dtype=float)
        original_rgb = np.asarray(original.convert("RGB"), dtype=float)
    assert np.abs(inline_rgb - original_rgb).mean() < 2.0  # the same picture, palette aside

"""item_sample: a path review's seeded sample of each benchmark's items, as the released script drew it
(its procedure re-done here on a frame shaped like its CSV: drop the excluded slide files, then pandas'
sample(n, random_state=seed)), and numpy's RandomState as a second oracle."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from giant_assets.experiments.declared import load_experiments
from giant_assets.experiments.itemsample import OFFICIAL_GTEX_EXCLUDE, ItemSample, sample_items
from giant_assets.experiments.spec import Experiment

REPO = Path(__file__).resolve().parents[2]


def items(n_gtex: int = 40, n_tcga: int = 30) -> pd.DataFrame:
    """benchmark_items-like rows: gtex holds the four excluded slides; the frame is not in CSV order."""
    rows = []
    for k in range(n_gtex):
        name = OFFICIAL_GTEX_EXCLUDE[k // 9] if k % 9 == 4 and k // 9 < 4 else f"GTEX-{k:04d}-0126.tiff"
        rows.append({"benchmark_name": "gtex", "benchmark_id": name[:-5], "image_path": f"d/{name}"})
    for k in range(n_tcga):
        rows.append({"benchmark_name": "tcga", "benchmark_id": str(k), "image_path": f"TCGA-{k}.svs"})
    frame = pd.DataFrame(rows)
    frame["row_number"] = np.arange(2, len(frame) + 2)
    return frame.sample(frac=1, random_state=7).reset_index(drop=True)  # shuffled: order by row_number


def official(frame: pd.DataFrame, benchmark: str, n: int, seed: int, exclude: tuple[str, ...]) -> list[str]:
    """The released procedure on the benchmark's CSV (rows in file order)."""
    df = frame[frame.benchmark_name == benchmark].sort_values("row_number").reset_index(drop=True)
    df["file_name"] = df["image_path"].map(lambda p: Path(p).name)
    df = df[~df["file_name"].isin(exclude)].reset_index(drop=True)
    df = df.sample(n=n, random_state=seed).reset_index(drop=True) if len(df) > n else df
    return df["benchmark_id"].tolist()


def test_the_official_sample_is_drawn_exactly() -> None:
    frame = items()
    sample = ItemSample(n=25, seed=42, exclude=OFFICIAL_GTEX_EXCLUDE)
    got = sample_items(frame, sample)
    for benchmark in ("gtex", "tcga"):
        mine = got[got.benchmark_name == benchmark]["benchmark_id"].tolist()
        assert mine == official(frame, benchmark, 25, 42, OFFICIAL_GTEX_EXCLUDE) and len(mine) == 25
        ordered = frame[frame.benchmark_name == benchmark].sort_values("row_number")
        kept = ordered[~ordered.image_path.str.rsplit("/", n=1).str[-1].isin(OFFICIAL_GTEX_EXCLUDE)]
        picked = np.random.RandomState(42).choice(len(kept), size=25, replace=False)
        assert mine == kept["benchmark_id"].iloc[picked].tolist()
    gtex = got[got.benchmark_name == "gtex"]["benchmark_id"]
    assert not set(gtex) & {name[:-5] for name in OFFICIAL_GTEX_EXCLUDE}
    other = sample_items(frame, ItemSample(n=25, seed=43, exclude=OFFICIAL_GTEX_EXCLUDE))
    assert other["benchmark_id"].tolist() != got["benchmark_id"].tolist()  # the seed decides


def test_no_sample_or_a_small_benchmark_runs_every_item() -> None:
    frame = items(n_gtex=10, n_tcga=30)
    assert sample_items(frame, None) is frame
    got = sample_items(frame, ItemSample(n=25, exclude=OFFICIAL_GTEX_EXCLUDE))
    gtex = got[got.benchmark_name == "gtex"]
    assert len(gtex) == 9 and gtex["row_number"].is_monotonic_increasing  # 10 less one excluded, all kept
    assert len(got[got.benchmark_name == "tcga"]) == 25


def test_the_declared_path_reviews_sample_as_released_and_only_path_reviews_may() -> None:
    declared = load_experiments(REPO / "experiments.yaml")
    for name in ("gpt5-path-review", "claude-path-review"):
        assert declared[name].item_sample == ItemSample(n=25, seed=42, exclude=OFFICIAL_GTEX_EXCLUDE)
    assert declared["demo-path-review"].item_sample is None and declared["gpt5-giant"].item_sample is None
    base = declared["gpt5-path-review"]
    assert base.config_hash() == base.model_copy(update={"item_sample": None}).config_hash()
    with pytest.raises(ValueError, match="item_sample: only for agent 'path_review'"):
        Experiment(name="x", agent="random", item_sample={"n": 3})
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Experiment(name="x", agent="path_review", model="m", item_sample={"n": 0})


def test_reading_an_experiment_file_does_not_import_pandas(monkeypatch) -> None:
    """Every CLI reads experiment declarations through this module; pandas (about a second of imports)
    is loaded only where a sample is drawn: a fresh copy of the module loads and validates without it."""
    import giant_assets.experiments.itemsample as module

    monkeypatch.setitem(sys.modules, "pandas", None)
    spec = importlib.util.spec_from_file_location("itemsample_without_pandas", module.__file__)
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)  # raises if the module imports pandas up front
    assert fresh.ItemSample(n=3, exclude=["a.tiff"]).exclude == ("a.tiff",)
    with pytest.raises(ImportError):
        fresh.sample_items(items(), fresh.ItemSample(n=3))

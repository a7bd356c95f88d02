"""Which items of a benchmark a path review runs: all of them, or a seeded sample as the released
``run_benchmark_path_review.py`` drew (25 of gtex and of tcga, seed 42, four gtex slides left out first).

The sample is pandas' ``DataFrame.sample(n, random_state=seed)`` over the benchmark's items in the CSV's
row order (``row_number``), after leaving out the items whose slide file name (the last part of
``image_path``) is in ``exclude``; a benchmark with at most ``n`` items (after the exclusion) runs all of
them, as the released script does.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:  # pandas is imported where a sample is drawn: every experiment file loads this module
    import pandas as pd

OFFICIAL_N, OFFICIAL_SEED = 25, 42
# the slides the released script left out of gtex before sampling (corrupt or missing there)
OFFICIAL_GTEX_EXCLUDE = (
    "GTEX-13QJ3-2726.tiff",
    "GTEX-1LGOU-0226.tiff",
    "GTEX-1NV88-0326.tiff",
    "GTEX-1269W-2626.tiff",
)


class ItemSample(BaseModel):
    """``n`` items drawn with ``seed`` from each benchmark, after leaving out the slides in ``exclude``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(ge=1, description="items per benchmark (all of them when it has no more)")
    seed: int = Field(default=OFFICIAL_SEED, description="pandas random_state")
    exclude: tuple[str, ...] = Field(
        default=(), description="slide file names (last part of image_path) left out before sampling"
    )


def sample_items(items: pd.DataFrame, sample: ItemSample | None) -> pd.DataFrame:
    """The rows of ``items`` (one or more benchmarks of ``benchmark_items``) to run: all when ``sample``
    is None, else each benchmark's sample (see the module docstring), in the sample's order."""
    if sample is None or items.empty:
        return items
    excluded = set(sample.exclude)
    parts = []
    for _, group in items.groupby("benchmark_name", sort=False):
        ordered = group.sort_values("row_number", kind="stable")
        names = ordered["image_path"].map(lambda p: PurePath(str(p)).name)
        kept = ordered[~names.isin(excluded).to_numpy()]
        parts.append(kept.sample(n=sample.n, random_state=sample.seed) if len(kept) > sample.n else kept)
    import pandas as pd

    return pd.concat(parts) if parts else items.iloc[:0]

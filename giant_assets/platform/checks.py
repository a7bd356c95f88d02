"""Asset checks: data quality of the resolved item table."""

import numpy as np
import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue, asset_check

from giant_assets.multipathqa.benchmarks import PANDA_GRADES
from giant_assets.multipathqa.prompts import missing_options
from giant_assets.platform.assets.ingest import benchmark_items

MIN_READABLE_SHARE = 1.0


@asset_check(asset=benchmark_items, description="(benchmark_name, benchmark_id) identifies one item")
def items_unique_ids(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    dupes = benchmark_items[benchmark_items.duplicated(["benchmark_name", "benchmark_id"], keep=False)]
    return AssetCheckResult(
        passed=dupes.empty,
        metadata={
            "duplicates": len(dupes),
            "examples": MetadataValue.md(
                dupes[["benchmark_name", "benchmark_id", "row_number"]].head(20).to_markdown(index=False)
                if len(dupes)
                else "none"
            ),
        },
    )


def truth_out_of_range(items: pd.DataFrame) -> pd.DataFrame:
    """Rows whose truth label is not a valid option index (or ISUP grade for panda)."""
    truth = items["truth_label"].to_numpy()
    is_panda = (items["benchmark_name"] == "panda").to_numpy()
    n_opts = items["n_options"].to_numpy()
    ok = np.where(is_panda, np.isin(truth, PANDA_GRADES), (truth >= 1) & (truth <= n_opts))
    return items.loc[~ok]


@asset_check(asset=benchmark_items, description="every truth label is in range for its benchmark")
def items_truth_in_range(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    bad = truth_out_of_range(benchmark_items)
    return AssetCheckResult(passed=bad.empty, metadata={"out_of_range": len(bad)})


@asset_check(asset=benchmark_items, description="share of items whose slide was found and opened")
def items_slides_readable(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    readable = benchmark_items["wsi_status"].eq("ok")
    per = (
        benchmark_items.assign(readable=readable)
        .groupby("benchmark_name")["readable"]
        .agg(readable="sum", total="count")
    )
    share = float(readable.mean()) if len(readable) else 0.0
    return AssetCheckResult(
        passed=share >= MIN_READABLE_SHARE,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "readable_share": share,
            "readable": int(readable.sum()),
            "total": len(readable),
            "per_benchmark": MetadataValue.md(per.to_markdown()),
        },
    )


def prompts_missing_options(items: pd.DataFrame) -> pd.DataFrame:
    """Items with options whose rendered prompt does not show every option as ``N. text``."""
    missing = [missing_options(p, o) for p, o in zip(items["prompt"], items["options"], strict=True)]
    out = items.assign(missing_options=missing)
    return out.loc[out["missing_options"].map(len) > 0]


@asset_check(asset=benchmark_items, description="every item with options shows all of them in its prompt")
def items_prompts_show_options(benchmark_items: pd.DataFrame) -> AssetCheckResult:
    bad = prompts_missing_options(benchmark_items)
    shown = bad[["benchmark_name", "benchmark_id", "missing_options"]].head(20)
    return AssetCheckResult(
        passed=bad.empty,
        metadata={
            "items_missing_options": len(bad),
            "examples": MetadataValue.md(shown.to_markdown(index=False) if len(bad) else "none"),
        },
    )


ITEM_CHECKS = [items_unique_ids, items_truth_in_range, items_slides_readable, items_prompts_show_options]

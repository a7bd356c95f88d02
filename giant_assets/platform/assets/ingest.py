"""Assets: the raw MultiPathQA CSV and the resolved, validated item table (with declared benchmarks)."""

from typing import Literal

import pandas as pd
from dagster import AssetExecutionContext, Config, Failure, MetadataValue, asset

from giant_assets.benchmarks.items import declared_items, resolve_by_root
from giant_assets.core.files import file_sha256
from giant_assets.multipathqa.errata import handle_errata
from giant_assets.multipathqa.fingerprint import add_fingerprints, item_set_fingerprint
from giant_assets.multipathqa.loading import parse_items, read_csv_strings
from giant_assets.platform.partitions import BENCHMARK
from giant_assets.platform.resources import ExperimentsResource, MultiPathQAResource, StorageResource
from giant_assets.platform.sensors import add_partitions

SOURCE_FILE_COLUMN = "source_file"


@asset(group_name="ingest", kinds={"pandas"})
def multipathqa_csv(
    context: AssetExecutionContext, dataset: MultiPathQAResource, storage: StorageResource
) -> pd.DataFrame:
    """The MultiPathQA CSV as text cells, from HuggingFace, a local file or the bundled sample."""
    path, source = dataset.fetch_csv(storage.root)
    raw = read_csv_strings(path)
    counts = raw["benchmark_name"].value_counts().sort_index()
    context.add_output_metadata(
        {
            "source": source,
            "path": str(path),
            "sha256": file_sha256(path),
            "rows": len(raw),
            "rows_per_benchmark": MetadataValue.md(counts.rename("rows").to_frame().to_markdown()),
        }
    )
    return raw.assign(**{SOURCE_FILE_COLUMN: str(path)})


class ItemsConfig(Config):
    """``fail``: any malformed row fails the asset listing every error; ``skip``: drop and report them."""

    on_invalid_rows: Literal["fail", "skip"] = "fail"


@asset(group_name="ingest", kinds={"openslide"})
def benchmark_items(
    context: AssetExecutionContext,
    config: ItemsConfig,
    multipathqa_csv: pd.DataFrame,
    dataset: MultiPathQAResource,
    storage: StorageResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """One row per valid question: rendered prompt, options, canonical truth label and its slide.

    The MultiPathQA CSV's five benchmarks, then each benchmark the experiments file declares (its items
    file read by benchmarks/items.py, its slides under its ``wsi_root``); every one of them becomes a
    column of the results grid (a benchmark partition) here.

    ``item_fingerprint`` identifies the question about the slide (multipathqa/fingerprint.py): stored runs
    are reused only for the same fingerprint. The released CSV's known errata are handled as the dataset's
    ``errata`` mode says (``erratum`` marks the rows; multipathqa/errata.py).
    """
    source = str(multipathqa_csv[SOURCE_FILE_COLUMN].iloc[0]) if len(multipathqa_csv) else "MultiPathQA CSV"
    items, errors = parse_items(multipathqa_csv.drop(columns=[SOURCE_FILE_COLUMN]), source)
    declarations = experiments.benchmarks()
    extra, extra_errors, unusable = declared_items(declarations)
    if unusable and config.on_invalid_rows == "fail":
        raise Failure(description="declared benchmark(s) cannot be read:\n" + "\n".join(unusable.values()))
    for why in unusable.values():
        context.log.warning(f"skipped benchmark: {why}")
    items = pd.concat([items, extra], ignore_index=True) if len(extra) else items
    errors = errors + extra_errors
    if errors and config.on_invalid_rows == "fail":
        listing = "\n".join(str(e) for e in errors[:200])
        raise Failure(
            description=f"{len(errors)} malformed row field(s) in {source}:\n{listing}",
            metadata={"errors": len(errors)},
        )
    for err in errors:
        context.log.warning(f"skipped: {err}")
    if errors and not len(items):  # on_invalid_rows: skip, and every row was malformed
        listing = "\n".join(str(e) for e in errors[:20])
        raise Failure(
            description=f"every row of {source} is malformed ({len(errors)} error(s)); nothing to evaluate:\n"
            f"{listing}",
            metadata={"errors": len(errors)},
        )
    n_invalid = int((~items["is_valid"]).sum()) if len(items) else 0
    items = items[items["is_valid"]].reset_index(drop=True) if len(items) else items
    items, errata = handle_errata(items, dataset.errata_mode)
    wsi_root = dataset.wsi_root_path(storage.root)
    roots = {name: d.wsi_root for name, d in declarations.items() if d.wsi_root is not None}
    items = add_fingerprints(resolve_by_root(items, roots, wsi_root))
    add_partitions(context.instance, BENCHMARK, list(experiments.benchmark_names()))
    status = pd.crosstab(items["benchmark_name"], items["wsi_status"]) if len(items) else pd.DataFrame()
    problems = items.loc[
        items["wsi_status"] != "ok", ["benchmark_name", "benchmark_id", "wsi_status", "wsi_error"]
    ]
    context.add_output_metadata(
        {
            "items": len(items),
            "slides_found": int((items["wsi_status"] == "ok").sum()),
            "filtered_is_valid_false": n_invalid,
            "skipped_malformed_rows": len(errors),
            "wsi_root": str(wsi_root),
            "declared_benchmarks": ", ".join(declarations) or "none",
            "item_set_fingerprint": item_set_fingerprint(items),
            "errata_mode": dataset.errata_mode,
            "errata_found": len(errata),
            "errata": MetadataValue.md(errata.to_markdown(index=False) if len(errata) else "none"),
            "slide_status_per_benchmark": MetadataValue.md(
                status.to_markdown() if len(status) else "no items"
            ),
            "missing_or_unreadable": MetadataValue.md(
                problems.to_markdown(index=False) if len(problems) else "none"
            ),
        }
    )
    return items

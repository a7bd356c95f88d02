"""The one Definitions object of the giant-assets code location."""

import os

from dagster import Definitions

from giant_assets.assets.evaluation import benchmark_metrics, item_predictions, metrics_summary, predictions
from giant_assets.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.checks import ITEM_CHECKS
from giant_assets.io_manager import ParquetDuckDBIOManager
from giant_assets.resources import MultiPathQAResource, StorageResource

storage = StorageResource(data_dir=os.environ.get("GIANT_DATA_DIR", ""))

ALL_ASSETS = [
    multipathqa_csv,
    benchmark_items,
    predictions,
    item_predictions,
    benchmark_metrics,
    metrics_summary,
]
ALL_CHECKS = [*ITEM_CHECKS]
RESOURCES = {
    "io_manager": ParquetDuckDBIOManager(storage=storage),
    "storage": storage,
    "dataset": MultiPathQAResource(
        source=os.environ.get("GIANT_CSV_SOURCE", "sample"),
        csv_path=os.environ.get("GIANT_CSV_PATH", ""),
    ),
}

defs = Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=RESOURCES)

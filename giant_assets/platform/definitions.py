"""The one Definitions object of the code location: assets, checks, sensors and resources."""

import os

from dagster import Definitions

from giant_assets.platform.assets.evaluation import (
    benchmark_metrics,
    item_predictions,
    metrics_summary,
    predictions,
)
from giant_assets.platform.assets.grading import GRADING_ASSETS, GRADING_SENSORS
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.inventory import slide_inventory
from giant_assets.platform.assets.roi import roi_evaluation
from giant_assets.platform.checks import ITEM_CHECKS
from giant_assets.platform.io_manager import ParquetDuckDBIOManager
from giant_assets.platform.resources import MultiPathQAResource, StorageResource

storage = StorageResource(data_dir=os.environ.get("GIANT_DATA_DIR", ""))

ALL_ASSETS = [
    multipathqa_csv,
    benchmark_items,
    slide_inventory,
    predictions,
    item_predictions,
    benchmark_metrics,
    metrics_summary,
    roi_evaluation,
    *GRADING_ASSETS,
]
ALL_CHECKS = [*ITEM_CHECKS]
ALL_SENSORS = [*GRADING_SENSORS]
RESOURCES = {
    "io_manager": ParquetDuckDBIOManager(storage=storage),
    "storage": storage,
    "dataset": MultiPathQAResource(
        source=os.environ.get("GIANT_CSV_SOURCE", "sample"),
        csv_path=os.environ.get("GIANT_CSV_PATH", ""),
        wsi_root=os.environ.get("GIANT_WSI_ROOT", ""),
    ),
}

defs = Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, sensors=ALL_SENSORS, resources=RESOURCES)

"""The one Definitions object of the code location: assets, checks, sensors and resources.

Only the sensors' interval (``GIANT_SENSOR_INTERVAL_S``, when set) is read from the environment here,
as the sensors are made; resources resolve their ``GIANT_*`` variables when used (see
``giant_assets.core.settings`` for the list). The modules this imports read none while importing.
"""

from giant_assets.core import heap
from giant_assets.core.shutdown import skip_final_collection

with heap.loading():  # no garbage collection during these imports; what they made is frozen after
    from dagster import AssetSelection, Definitions, ExecutorDefinition, PartitionedConfig, define_asset_job

    from giant_assets.platform.assets.figures import paper_figures
    from giant_assets.platform.assets.grading import GRADING_ASSETS, make_submissions_sensor
    from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
    from giant_assets.platform.assets.inventory import slide_inventory
    from giant_assets.platform.assets.leaderboard import experiment_comparisons, leaderboard
    from giant_assets.platform.assets.path_review import path_review
    from giant_assets.platform.assets.predictions import predictions, trajectory_steps
    from giant_assets.platform.assets.report import trajectory_pictures, trajectory_viewer
    from giant_assets.platform.assets.reviews import pathologist_reviews, review_metrics
    from giant_assets.platform.assets.roi import roi_evaluation
    from giant_assets.platform.assets.scores import benchmark_metrics, item_predictions
    from giant_assets.platform.automation import make_automation_sensor
    from giant_assets.platform.batch_sensor import make_batch_rounds_sensor
    from giant_assets.platform.checks import ITEM_CHECKS, RESULT_CHECKS
    from giant_assets.platform.executor import in_process_or_multiprocess
    from giant_assets.platform.io_manager import ParquetDuckDBIOManager
    from giant_assets.platform.partitions import results_partitions, split_key
    from giant_assets.platform.resources import ExperimentsResource, MultiPathQAResource, StorageResource
    from giant_assets.platform.sensors import make_experiments_sensor

storage = StorageResource()

# everything computed for one cell of the results grid (one experiment over one benchmark)
CELL_ASSETS = [
    predictions,
    trajectory_steps,
    item_predictions,
    benchmark_metrics,
    roi_evaluation,
    path_review,
    trajectory_pictures,
    trajectory_viewer,
]
ALL_ASSETS = [
    multipathqa_csv,
    benchmark_items,
    slide_inventory,
    *CELL_ASSETS,
    leaderboard,
    experiment_comparisons,
    paper_figures,
    *GRADING_ASSETS,
    pathologist_reviews,
    review_metrics,
]
ALL_CHECKS = [*ITEM_CHECKS, *RESULT_CHECKS]
PROVIDER_TAG = "giant/provider"  # the run queue bounds the runs at once per value (dagster_home/postgres)


def cell_tags(partition_key: str) -> dict[str, str]:
    """A cell's run tags: the provider its experiment calls (``offline`` for agents without a model)."""
    experiment = RESOURCES["experiments"].get(split_key(partition_key)[0])
    return {PROVIDER_TAG: experiment.provider if experiment.calls_model else "offline"}


def cell_config(run_config: dict) -> PartitionedConfig:
    """A grid job's config: the same ``run_config`` for every cell, and each cell's provider tag."""
    return PartitionedConfig(
        partitions_def=results_partitions,
        run_config_for_partition_key_fn=lambda _: run_config,
        tags_for_partition_key_fn=cell_tags,
    )


# one cell of the results grid, end to end: what a backfill of an experiment row (or benchmark column)
# runs per partition, from the UI or `dagster job backfill -j evaluate_cell --partitions ...`; its steps
# run in the run's own process (the default executor: one import of the code location per cell)
evaluate_cell = define_asset_job(
    "evaluate_cell",
    selection=AssetSelection.assets(*CELL_ASSETS),
    partitions_def=results_partitions,
    config=cell_config({}),
)
# each reads its interval (GIANT_SENSOR_INTERVAL_S) here, as the code location loads
ALL_SENSORS = [
    make_experiments_sensor(),
    make_submissions_sensor(),
    make_batch_rounds_sensor(evaluate_cell),
    make_automation_sensor(),
]
RESOURCES = {
    "io_manager": ParquetDuckDBIOManager(storage=storage),
    "storage": storage,
    "dataset": MultiPathQAResource(),
    "experiments": ExperimentsResource(),
}


def build_definitions(
    executor: ExecutorDefinition = in_process_or_multiprocess, jobs: tuple = ()
) -> Definitions:
    """The code location's definitions; another executor (the cluster's Celery) and jobs may be given."""
    return Definitions(
        assets=ALL_ASSETS,
        asset_checks=ALL_CHECKS,
        jobs=[evaluate_cell, *jobs],
        sensors=ALL_SENSORS,
        resources=RESOURCES,
        executor=executor,
    )


defs = build_definitions()  # a run's steps in its own process unless its run config says multiprocess
skip_final_collection()  # a CLI run ends ~0.75 s sooner (giant_assets/core/shutdown.py)

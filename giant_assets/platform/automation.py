"""Declarative automation: the tables across experiments follow the results cells they read.

After a backfill of an experiment row (or any materialization of a cell), the daemon that ``make ui``
starts materializes ``leaderboard``, ``leaderboard_long``, ``leaderboard_stale``,
``experiment_comparisons`` and ``paper_figures``, and re-renders
a cell's ``trajectory_viewer`` whose inputs changed outside the run that built it; nobody has to
materialize them by hand.
"""

from dagster import (
    AssetSelection,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
)

from giant_assets.core.settings import sensor_interval

# the per-cell assets the cross-experiment tables read: the grid is sparse by design (not every
# experiment runs every benchmark), so their missing cells must not hold the tables back
RESULTS_INPUTS = AssetSelection.assets("benchmark_metrics", "item_predictions")

FOLLOWS_RESULTS = (
    AutomationCondition.any_deps_updated().since_last_handled()
    & ~AutomationCondition.any_deps_missing().ignore(RESULTS_INPUTS)
    & ~AutomationCondition.any_deps_in_progress()
    & ~AutomationCondition.in_progress()
).with_label("follows_results")
"""A table across experiments: runs once any cell it reads has updated, when no run or backfill is
still writing one of those cells (so a row backfill gives one update, after its last cell)."""

# the tables every cell reads whole: a new CSV updates them for every cell at once, and a cell whose
# results answer yesterday's items cannot be rebuilt over today's (it fails refusing foreign runs)
SHARED_INPUTS = AssetSelection.assets("benchmark_items")

FOLLOWS_CELL = AutomationCondition.eager().replace(
    "any_deps_updated", AutomationCondition.any_deps_updated().ignore(SHARED_INPUTS)
)
"""A per-cell asset: re-runs when its own cell's results update in a run that did not also build it.

A new ``benchmark_items`` alone launches nothing: a cell's results are rebuilt over today's items only
by re-running the cell (what ``leaderboard_stale`` says), and that update then re-renders its viewer;
so no run starts for a cell whose results answer another item set (a switch from the sample CSV)."""


def make_automation_sensor() -> AutomationConditionSensorDefinition:
    """The sensor evaluating these conditions, every 15 s (``GIANT_SENSOR_INTERVAL_S``, read now)."""
    return AutomationConditionSensorDefinition(
        "results_automation",
        target=AssetSelection.assets(
            "leaderboard", "leaderboard_long", "leaderboard_stale", "experiment_comparisons", "paper_figures"
        )
        | AssetSelection.assets("trajectory_viewer"),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=sensor_interval(15),
        description=(
            "materializes the leaderboard, comparisons and viewer as the results cells they read land"
        ),
    )

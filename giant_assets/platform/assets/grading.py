"""Grading assets: every file dropped in ``<data_dir>/submissions/`` becomes a graded partition.

Partitions: one per submission file (``.csv``/``.jsonl``, not hidden), keyed by
``giant_assets.grading.submissions.partition_key_for`` (the file name when it is already
``[A-Za-z0-9_.-]+``). Which task a file is for: a ``task_id``/``benchmark_name`` column (CSV) or field
(JSONL) per row, else the file name convention ``<task>__<anything>.csv`` (e.g. ``gtex__gpt5.csv``).
Tasks: the five MultiPathQA benchmarks from the ``benchmark_items`` asset, plus user tasks described by
YAML/JSON files in ``<data_dir>/tasks/``. An invalid submission is not a failed run: it yields report rows
with ``valid_submission = False`` and the reason in ``error``.
"""

import json

import pandas as pd
from dagster import (
    AssetExecutionContext,
    AssetIn,
    DynamicPartitionsDefinition,
    Failure,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    asset,
    sensor,
)

from giant_assets.core.settings import sensor_interval
from giant_assets.grading.grade import aggregate_reports, grade_file
from giant_assets.grading.render import reports_markdown
from giant_assets.grading.report import reports_to_frame
from giant_assets.grading.submissions import file_signature, submission_files
from giant_assets.grading.task_files import TaskDefinitionError, load_task_file
from giant_assets.grading.tasks import TaskRegistry, register_multipathqa_tasks
from giant_assets.platform.resources import StorageResource

SUBMISSIONS_DIR = "submissions"
TASKS_DIR = "tasks"
TASK_FILE_SUFFIXES = (".yaml", ".yml", ".json")

submission_partitions = DynamicPartitionsDefinition(name="submissions")


def _registry(context: AssetExecutionContext, items: pd.DataFrame, storage: StorageResource) -> TaskRegistry:
    registry = TaskRegistry()
    folder = storage.root / TASKS_DIR
    task_files = sorted(p for p in folder.glob("*") if p.suffix.lower() in TASK_FILE_SUFFIXES)
    for path in task_files:
        try:
            registry.register(load_task_file(path))
        except (TaskDefinitionError, ValueError) as exc:
            context.log.warning(f"skipped user task file: {exc}")
    register_multipathqa_tasks(items, to=registry)
    return registry


@asset(
    partitions_def=submission_partitions,
    ins={"benchmark_items": AssetIn()},
    group_name="grading",
    kinds={"pandas"},
)
def graded_submissions(
    context: AssetExecutionContext, benchmark_items: pd.DataFrame, storage: StorageResource
) -> pd.DataFrame:
    """One report row per task graded in this submission file: score, medal, rank, human comparison."""
    key = context.partition_key
    folder = storage.root / SUBMISSIONS_DIR
    path = submission_files(folder).get(key)
    if path is None:
        raise Failure(description=f"no submission file in {folder} has partition key {key!r} (removed?)")
    reports = grade_file(path, _registry(context, benchmark_items, storage))
    for report in reports:
        if not report.valid_submission:
            context.log.warning(f"{path.name}: invalid submission for task {report.task_id}: {report.error}")
    summary = aggregate_reports(reports)
    single = reports[0] if len(reports) == 1 else None
    context.add_output_metadata(
        {
            "submission_file": path.name,
            "tasks": ", ".join(r.task_id for r in reports),
            "valid": summary["total_valid_submissions"] == len(reports),
            "score": single.score if single else summary["mean_score"],
            "medal": single.medal
            if single
            else json.dumps({m: summary[f"total_{m}_medals"] for m in ("gold", "silver", "bronze")}),
            "report": MetadataValue.md(reports_markdown(reports)),
        }
    )
    return reports_to_frame(reports).assign(partition_key=key, submission_file=path.name)


def submissions_tick(context: SensorEvaluationContext, storage: StorageResource) -> SensorResult | SkipReason:
    """One tick of ``submissions_sensor``: adds a partition per new submission file and requests a run
    for every new or rewritten file.

    The cursor maps partition key → file signature (mtime, size), so a file still being copied in is
    graded again once it is complete; run keys carry the signature, so a run is never requested twice.
    """
    files = submission_files(storage.root / SUBMISSIONS_DIR)
    signatures = {key: file_signature(path) for key, path in files.items()}
    seen = json.loads(context.cursor) if context.cursor else {}
    known = set(context.instance.get_dynamic_partitions(submission_partitions.name))
    new_keys = sorted(set(files) - known)
    to_run = sorted(set(new_keys) | {k for k, sig in signatures.items() if seen.get(k) != sig})
    if not to_run:
        return SkipReason(f"no new or changed submission files among {len(files)}")
    return SensorResult(
        run_requests=[RunRequest(partition_key=k, run_key=f"{k}@{signatures[k]}") for k in to_run],
        dynamic_partitions_requests=[submission_partitions.build_add_request(new_keys)] if new_keys else [],
        cursor=json.dumps(signatures, sort_keys=True),
    )


def make_submissions_sensor() -> SensorDefinition:
    """``submissions_sensor``, every 30 s (``GIANT_SENSOR_INTERVAL_S``, read now)."""
    return sensor(
        name="submissions_sensor",
        asset_selection=[graded_submissions],
        minimum_interval_seconds=sensor_interval(30),
    )(submissions_tick)


GRADING_ASSETS = [graded_submissions]

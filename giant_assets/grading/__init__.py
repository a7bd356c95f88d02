"""Grading API (biomlbench-style): validate and grade submissions, rank them on leaderboards.

Plain Python, no Dagster. See ``grade`` (files → reports), ``validate`` (messages per problem),
``graders`` (Grader), ``medals`` (Kaggle medal rules), ``human`` (human baselines), ``tasks`` (Task,
registry, MultiPathQA tasks), ``task_files`` (user tasks from YAML/JSON) and ``metrics`` (library).

Names are imported on first use, so ``giant-grade`` starts without loading scipy/scikit-learn
unless a user task needs a library metric.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "aggregate_reports": "grade",
    "grade_csv": "grade",
    "grade_file": "grade",
    "grade_jsonl": "grade",
    "grade_predictions_jsonl": "grade",
    "grade_submission": "grade",
    "task_id_from_filename": "grade",
    "GradeFnImportError": "graders",
    "Grader": "graders",
    "InvalidSubmissionError": "graders",
    "calculate_human_performance_metrics": "human",
    "medal_positions": "medals",
    "rank_score": "medals",
    "METRIC_LIBRARY": "metrics",
    "Metric": "metrics",
    "get_metric": "metrics",
    "format_report": "render",
    "reports_markdown": "render",
    "TaskReport": "report",
    "reports_to_frame": "report",
    "TaskDefinitionError": "task_files",
    "load_task_file": "task_files",
    "Task": "tasks",
    "TaskRegistry": "tasks",
    "get_task": "tasks",
    "register_multipathqa_tasks": "tasks",
    "register_task": "tasks",
    "registry": "tasks",
    "tasks_from_items": "tasks",
    "validate_submission": "validate",
    "write_json": "report",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'giant_assets.grading' has no attribute {name!r}")
    return getattr(importlib.import_module(f"giant_assets.grading.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

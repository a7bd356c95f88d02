"""Grading submission files into TaskReports. Bad user input never raises: it yields an invalid report.

Upstream API (biomlbench / mle-bench): ``grade_csv(path, task)``, ``grade_jsonl(submission_path,
output_dir)`` over a JSONL of ``{"task_id", "submission_path"}`` lines (paths relative to that file)
writing ``<output_dir>/<timestamp>_grading_report.json`` and one report per task under
``<timestamp>_individual_reports/``, and ``aggregate_reports`` with upstream's keys.

This project's multi-task prediction files (JSONL rows, or CSV with a task column, of
``{"task_id", "benchmark_id", "prediction"}``) are graded by ``grade_predictions_jsonl``. Which task a
file belongs to in ``grade_file``: the ``task`` argument; else a ``task_id``/``benchmark_name`` column
(CSV) or field (JSONL, decided by its first line); else the file name ``<task>__<anything>.csv``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from giant_assets.grading.graders import InvalidSubmissionError
from giant_assets.grading.human import calculate_human_performance_metrics
from giant_assets.grading.reader import TASK_COLUMN, SubmissionFileError, open_submission
from giant_assets.grading.report import TaskReport, write_json
from giant_assets.grading.tasks import Task, TaskRegistry
from giant_assets.grading.tasks import registry as DEFAULT_REGISTRY  # noqa: N812 - upstream's name
from giant_assets.grading.validate import TaskChecker, check_file, validate_submission
from giant_assets.judges.safe_json import JsonLimitError, loads

__all__ = [  # biomlbench.grade's names, plus this project's
    "aggregate_reports", "calculate_human_performance_metrics", "grade_csv", "grade_file", "grade_jsonl",
    "grade_predictions_jsonl", "grade_submission", "task_id_from_filename", "validate_submission",
]  # fmt: skip
UNKNOWN_TASK = "unknown"
TASK_SEPARATOR = "__"
TaskCollection = Task | TaskRegistry | Mapping[str, Task] | Iterable[Task]


def task_id_from_filename(name: str) -> str | None:
    """``gtex__run3.csv`` → ``gtex``; None when the file name has no ``__``."""
    stem = Path(name).stem
    task_id, sep, _ = stem.partition(TASK_SEPARATOR)
    return task_id if sep and task_id else None


def _report(
    task: Task, path: Path | str, score: float | None = None, error: str | None = None, exists: bool = True
) -> TaskReport:
    """A report with leaderboard ranking and human comparison for ``score`` (None: invalid)."""
    ranking = task.grader.rank_score(score, task.leaderboard) if task.leaderboard is not None else {}
    if ranking and score is None:
        ranking["above_median"] = None
    beats_human, human_percentile = calculate_human_performance_metrics(
        score, task.human_scores, task.is_lower_better
    )
    return TaskReport(
        task_id=task.id,
        submission_path=str(path),
        score=score,
        beats_human=beats_human,
        human_percentile=human_percentile,
        valid_submission=score is not None,
        error=error,
        n_items=task.n_items,
        is_lower_better=task.is_lower_better,
        metric=task.grader.name,
        score_as_percent=task.score_as_percent,
        submission_exists=exists,
        **ranking,
    )


def _unknown_task_report(task_id: str, path: Path | str, error: str) -> TaskReport:
    return TaskReport(
        task_id=task_id, submission_path=str(path), valid_submission=False, error=error,
        submission_exists=Path(path).is_file(),
    )  # fmt: skip


def _score(task: Task, path: Path | str, checked: tuple) -> TaskReport:
    frame, problems = checked
    if frame is None:
        return _report(task, path, error="\n".join(problems), exists=Path(path).is_file())
    try:
        score = task.grader.score(frame, task.answers)
    except InvalidSubmissionError as exc:
        return _report(task, path, error=f"{Path(path).name}: {exc}")
    return _report(task, path, score=score)


def grade_csv(path: Path | str, task: Task) -> TaskReport:
    """Grade one submission file (CSV, or JSONL rows of this task) for ``task``."""
    return _score(task, path, check_file(path, task))


def _as_task_map(tasks: TaskCollection) -> dict[str, Task]:
    if isinstance(tasks, Task):
        return {tasks.id: tasks}
    if isinstance(tasks, TaskRegistry):
        return {t.id: t for t in tasks}
    if isinstance(tasks, Mapping):
        return dict(tasks)
    return {t.id: t for t in tasks}


def grade_predictions_jsonl(path: Path | str, task_or_tasks: TaskCollection) -> list[TaskReport]:
    """Grade a multi-task prediction file (JSONL rows, or CSV with a task column): one report per task.

    With a single Task every row is taken as that task's (rows naming other tasks are ignored). With a
    collection, each row must name its task; rows naming unregistered tasks give an invalid report for
    that task id, rows naming none give one report with task id ``unknown``. The file is streamed once.
    """
    if isinstance(task_or_tasks, Task):
        return [grade_csv(path, task_or_tasks)]
    tasks = _as_task_map(task_or_tasks)
    try:
        sub = open_submission(path)
        if not sub.has_task_column:
            what = "column" if sub.unit == "row" else "field"
            raise SubmissionFileError(
                f"{sub.path.name}: rows do not say their task: add a 'task_id' (or 'benchmark_name') "
                f"{what}, or grade it for one task"
            )
        checkers: dict[str, TaskChecker] = {}
        unknown: dict[str, None] = {}
        no_task: list[int] = []
        n_no_task = 0
        for chunk in sub.chunks():
            named = chunk[TASK_COLUMN].fillna("").astype(str).str.strip() if TASK_COLUMN in chunk else None
            if named is None:
                n_no_task += len(chunk)
                no_task.extend(chunk["_line"].tolist()[: 5 - len(no_task)])
                continue
            for task_id, rows in chunk.groupby(named, sort=False):
                if task_id == "":
                    n_no_task += len(rows)
                    no_task.extend(rows["_line"].tolist()[: max(0, 5 - len(no_task))])
                elif task_id not in tasks:
                    unknown.setdefault(task_id)
                else:
                    checker = checkers.setdefault(
                        task_id, TaskChecker(tasks[task_id], sub.unit, sub.path.name)
                    )
                    checker.add(rows)
    except SubmissionFileError as exc:
        return [_unknown_task_report(UNKNOWN_TASK, path, str(exc))]
    reports = [_score(tasks[t], path, c.finish()) for t, c in checkers.items()]
    for task_id in unknown:
        error = f"{sub.path.name}: unknown task {task_id!r}; known tasks: {sorted(tasks)}"
        reports.append(_unknown_task_report(task_id, path, error))
    if n_no_task:
        lines = ", ".join(str(n) for n in no_task)
        error = f"{sub.path.name}: {n_no_task} {sub.unit}(s) name no task: {sub.unit} {lines}"
        reports.append(_unknown_task_report(UNKNOWN_TASK, path, error))
    return reports


def grade_file(path: Path | str, tasks: TaskCollection, task_id: str | None = None) -> list[TaskReport]:
    """Grade ``path`` for ``task_id`` if given, else the task(s) its rows or file name name."""
    task_map = _as_task_map(tasks)
    if task_id is None:
        try:
            has_column = open_submission(path).has_task_column
        except SubmissionFileError as exc:
            return [_unknown_task_report(task_id_from_filename(str(path)) or UNKNOWN_TASK, path, str(exc))]
        task_id = None if has_column else task_id_from_filename(str(path))
        if task_id is None:
            return grade_predictions_jsonl(path, task_map)
    if task_id not in task_map:
        return [
            _unknown_task_report(task_id, path, f"unknown task {task_id!r}; known tasks: {sorted(task_map)}")
        ]
    return [grade_csv(path, task_map[task_id])]


def read_manifest(path: Path) -> list[dict]:
    """``{"task_id", "submission_path"}`` lines (blank lines and lines starting with # or // skipped)."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith(("#", "//")):
            continue
        try:
            entry = loads(text, f"{path.name}: line {number}")
        except JsonLimitError as exc:
            raise SubmissionFileError(str(exc)) from None
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), str) for k in ("task_id", "submission_path")
        ):
            raise SubmissionFileError(
                f'{path.name}: line {number}: expected {{"task_id": ..., "submission_path": ...}} strings'
            )
        entries.append(entry)
    return entries


def grade_submission(path: Path, task_id: str, registry: TaskRegistry | Mapping[str, Task]) -> TaskReport:
    """One manifest entry: a missing file or an unknown task is an invalid report, not an exception."""
    tasks = _as_task_map(registry)
    if task_id not in tasks:
        return _unknown_task_report(task_id, path, f"unknown task {task_id!r}; known tasks: {sorted(tasks)}")
    return grade_csv(path, tasks[task_id])


def grade_jsonl(
    submission_path: Path | str,
    output_dir: Path | str,
    registry: TaskRegistry | Mapping[str, Task] | None = None,
) -> tuple[Path, Path]:
    """Grade the submissions listed in a JSONL of ``{"task_id", "submission_path"}`` lines (biomlbench).

    Paths are relative to the JSONL file's folder. Writes ``<output_dir>/<UTC timestamp>_grading_report.json``
    (``aggregate_reports``) and ``<timestamp>_individual_reports/<task_id>.json``, created with the user's
    umask; returns both paths. ``registry`` defaults to the module-level task registry.
    """
    submission_path, output_dir = Path(submission_path), Path(output_dir)
    registry = DEFAULT_REGISTRY if registry is None else registry
    reports = [
        grade_submission(submission_path.parent / e["submission_path"], e["task_id"], registry)
        for e in read_manifest(submission_path)
    ]
    timestamp = time.strftime("%Y-%m-%dT%H-%M-%S-%Z", time.gmtime())
    save_path = output_dir / f"{timestamp}_grading_report.json"
    individual = output_dir / f"{timestamp}_individual_reports"
    output_dir.mkdir(parents=True, exist_ok=True)
    write_json(save_path, aggregate_reports(reports))
    individual.mkdir(exist_ok=True)
    for report in reports:
        safe_id = report.task_id.replace("/", "_").replace("\\", "_").replace("\0", "_").lstrip(".") or "task"
        write_json(individual / f"{safe_id}.json", report.to_dict())
    return save_path, individual


def aggregate_reports(reports: Sequence[TaskReport]) -> dict:
    """Upstream's summary keys (``total_runs``, ``total_gold_medals``, …, ``task_reports``) plus
    ``mean_score`` (mean of valid scores, None without any)."""
    percentiles = [r.leaderboard_percentile for r in reports if r.leaderboard_percentile is not None]
    valid = [r.score for r in reports if r.valid_submission and r.score is not None]
    gold, silver, bronze = (
        sum(bool(getattr(r, f"{m}_medal")) for r in reports) for m in ("gold", "silver", "bronze")
    )
    return {
        "total_runs": len(reports),
        "total_runs_with_submissions": sum(bool(r.submission_exists) for r in reports),
        "total_valid_submissions": sum(bool(r.valid_submission) for r in reports),
        "total_medals": gold + silver + bronze,
        "total_gold_medals": gold,
        "total_silver_medals": silver,
        "total_bronze_medals": bronze,
        "total_above_median": sum(bool(r.above_median) for r in reports),
        "total_beats_human": sum(bool(r.beats_human) for r in reports),
        "avg_leaderboard_percentile": round(sum(percentiles) / len(percentiles), 1) if percentiles else None,
        "best_leaderboard_percentile": round(max(percentiles), 1) if percentiles else None,
        "worst_leaderboard_percentile": round(min(percentiles), 1) if percentiles else None,
        "mean_score": float(np.mean(valid)) if valid else None,
        "task_reports": [r.to_dict() for r in reports],
    }

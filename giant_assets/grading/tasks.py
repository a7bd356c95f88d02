"""Gradable tasks and a registry of them; one task per MultiPathQA benchmark, built from the items table.

A task's ``answers`` hold one row per item: ``id_column`` (text ids) and ``target_column`` (the truth).
Predictions are checked against, in order of precedence:

* ``options_column`` (per-item option lists): an integer 1..len(options) of that item, or, with
  ``accept_option_text``, the exact option text (case-insensitive), mapped to its 1-based index;
* ``allowed_labels``: an integer from that set (e.g. the ISUP grades 0..5);
* neither: any finite number (regression scores, probabilities).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from giant_assets.benchmarks.declaration import name_problem
from giant_assets.eval.metrics import METRICS
from giant_assets.grading.graders import AlignedMetric, Grader
from giant_assets.grading.leaderboards import reference_leaderboard
from giant_assets.multipathqa.benchmarks import BENCHMARKS, PANDA_GRADES, BenchmarkSpec
from giant_assets.multipathqa.loading import parse_options

ITEM_COLUMNS = ("benchmark_name", "benchmark_id", "truth_label", "metric_type")
OPTIONS_COLUMN = "options"


@dataclass(frozen=True, eq=False)
class Task:
    """Everything needed to validate, score and rank a submission for one task."""

    id: str
    name: str
    answers: pd.DataFrame
    grader: Grader
    allowed_labels: tuple[int, ...] | None = None
    leaderboard: pd.DataFrame | None = None
    human_scores: pd.DataFrame | None = None
    id_column: str = "benchmark_id"
    target_column: str = "truth_label"
    options_column: str | None = None
    accept_option_text: bool = False
    score_as_percent: bool = False

    def __post_init__(self) -> None:
        needed = [self.id_column, self.target_column] + ([self.options_column] if self.options_column else [])
        missing = [c for c in needed if c not in self.answers.columns]
        if missing:
            raise ValueError(
                f"task {self.id!r}: answers lack column(s) {missing}; they have {list(self.answers.columns)}"
            )
        dupes = self.answers[self.id_column][self.answers[self.id_column].duplicated()]
        if len(dupes):
            raise ValueError(f"task {self.id!r}: duplicate answer id(s) {dupes.head(5).tolist()}")
        if self.leaderboard is not None:  # a board not stored best first is an error now, not at grading
            try:
                self.grader.rank_score(None, self.leaderboard)
            except ValueError as exc:
                raise ValueError(f"task {self.id!r}: leaderboard: {exc}") from None

    @property
    def is_lower_better(self) -> bool:
        """The score direction: from the leaderboard's order (upstream's rule), else the grader's."""
        return self.grader.is_lower_better(self.leaderboard)

    @property
    def n_items(self) -> int:
        return len(self.answers)


class TaskRegistry:
    """Tasks by id."""

    def __init__(self, tasks: Iterable[Task] = ()) -> None:
        self._tasks: dict[str, Task] = {}
        for task in tasks:
            self.register(task)

    def register(self, task: Task, replace: bool = False) -> Task:
        if task.id in self._tasks and not replace:
            raise ValueError(f"task {task.id!r} is already registered (pass replace=True to replace it)")
        self._tasks[task.id] = task
        return task

    def get_task(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id]
        except KeyError:
            known = sorted(self._tasks) or "none (register MultiPathQA tasks from the items table first)"
            raise KeyError(f"unknown task {task_id!r}; registered tasks: {known}") from None

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks.values())

    def __len__(self) -> int:
        return len(self._tasks)


registry = TaskRegistry()


def register_task(task: Task, replace: bool = False, to: TaskRegistry | None = None) -> Task:
    """Add ``task`` to ``to`` (default: the module-level ``registry``)."""
    return (registry if to is None else to).register(task, replace=replace)


def get_task(task_id: str, source: TaskRegistry | None = None) -> Task:
    """The task ``task_id`` from ``source`` (default: the module-level ``registry``)."""
    return (registry if source is None else source).get_task(task_id)


def _option_list(value: object) -> list[str] | None:
    """Options as stored in Parquet (array), in memory (list) or in a CSV (Python list literal)."""
    if isinstance(value, str):
        return parse_options(value)
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return [str(v) for v in value]


def _declared_spec(name: str, group: pd.DataFrame, metric_types: list[str]) -> BenchmarkSpec:
    """A declared benchmark's spec from its items: option answers where it has options, else grades."""
    why = name_problem(name)
    if why or len(metric_types) != 1 or metric_types[0] not in METRICS:
        raise ValueError(f"items table: benchmark {name!r}: {why or f'metric_type {metric_types}'}")
    has_options = bool(group[OPTIONS_COLUMN].map(lambda v: _option_list(v) is not None).all())
    return BenchmarkSpec(name, metric_types[0], "label" if has_options else "grade")


def _grades(spec: BenchmarkSpec, truth: pd.Series) -> tuple[int, ...]:
    """The grades a submission may give: ISUP 0..5 for panda, else 0..the highest true grade."""
    return PANDA_GRADES if spec.name in BENCHMARKS else tuple(range(int(truth.max()) + 1))


def tasks_from_items(items: pd.DataFrame) -> dict[str, Task]:
    """One task per benchmark in the items table, scored with ``giant_assets.eval.metrics.METRICS``."""
    missing = [c for c in ITEM_COLUMNS if c not in items.columns]
    if missing:
        raise ValueError(f"items table lacks column(s) {missing}; it has {list(items.columns)}")
    tasks: dict[str, Task] = {}
    for name, group in items.groupby("benchmark_name", sort=True):
        metric_types = sorted(group["metric_type"].unique())
        spec = BENCHMARKS.get(str(name)) or _declared_spec(str(name), group, metric_types)
        if metric_types != [spec.metric_type]:
            raise ValueError(
                f"benchmark {name!r}: metric_type must be {spec.metric_type!r} (MultiPathQA), "
                f"got {metric_types}"
            )
        answers = pd.DataFrame(
            {
                "benchmark_id": group["benchmark_id"].astype(str).str.strip().to_numpy(),
                "truth_label": group["truth_label"].astype("int64").to_numpy(),
            }
        )
        with_options = spec.answer_kind != "grade"
        if with_options:
            if OPTIONS_COLUMN not in group.columns:
                raise ValueError(f"benchmark {name!r} needs the items' 'options' column")
            answers[OPTIONS_COLUMN] = [_option_list(v) for v in group[OPTIONS_COLUMN]]
            no_options = answers.loc[answers[OPTIONS_COLUMN].isna(), "benchmark_id"]
            if len(no_options):
                raise ValueError(f"benchmark {name!r}: items without options: {no_options.head(5).tolist()}")
        metric = metric_types[0]
        tasks[str(name)] = Task(
            id=str(name),
            name=f"{'MultiPathQA ' if str(name) in BENCHMARKS else ''}{name} ({metric})",
            answers=answers,
            # full precision (decimals=None): a graded export equals benchmark_metrics exactly
            grader=Grader(
                metric, AlignedMetric(METRICS[metric], "benchmark_id", "truth_label"), False, decimals=None
            ),
            allowed_labels=None if with_options else _grades(spec, answers["truth_label"]),
            leaderboard=reference_leaderboard(str(name)),
            options_column=OPTIONS_COLUMN if with_options else None,
            accept_option_text=spec.answer_kind == "label",
            score_as_percent=True,
        )
    return tasks


def register_multipathqa_tasks(items: pd.DataFrame, to: TaskRegistry | None = None) -> dict[str, Task]:
    """Build the MultiPathQA tasks from ``items`` and (re)register them."""
    tasks = tasks_from_items(items)
    for task in tasks.values():
        register_task(task, replace=True, to=to)
    return tasks

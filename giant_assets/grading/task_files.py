"""User tasks from a YAML or JSON description file (paths in it are relative to that file).

Example ``task.yaml``::

    id: caco2                  # letters, digits, '_', '-', '.'
    name: Caco-2 permeability  # optional
    answers: answers.csv       # CSV with the id and target columns
    id_column: drug_id         # default benchmark_id (the submission uses this column name too)
    target_column: y           # default truth_label
    metric: rmse               # a name from METRIC_LIBRARY …
    # grade_fn: my_pkg.metrics:score   # … or a "module:function" taking (submission_df, answers_df)
    is_lower_better: true      # default: the metric's direction; for grade_fn the leaderboard's order
    labels: [0, 1]             # optional: allowed integer labels (classification)
    leaderboard: leaderboard.csv        # optional, needs a 'score' column
    human_baselines: humans.csv         # optional, needs a 'score' column
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import yaml

from giant_assets.grading.graders import AlignedMetric, Grader
from giant_assets.grading.human import HUMAN_SCORE_COLUMN
from giant_assets.grading.leaderboards import read_leaderboard_csv
from giant_assets.grading.tasks import Task

KEYS = {
    "id", "name", "answers", "id_column", "target_column", "metric", "grade_fn",
    "is_lower_better", "labels", "leaderboard", "human_baselines", "score_as_percent",
}  # fmt: skip
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


class TaskDefinitionError(ValueError):
    """A task description file that cannot be turned into a Task; the message names file and key."""


def _read_description(path: Path) -> dict:
    if not path.is_file():
        raise TaskDefinitionError(f"task description not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise TaskDefinitionError(f"{path}: cannot parse: {exc}") from None
    if not isinstance(data, dict):
        raise TaskDefinitionError(f"{path}: expected a mapping of keys, got {type(data).__name__}")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise TaskDefinitionError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(KEYS)}")
    for key in ("id", "answers"):
        if not data.get(key):
            raise TaskDefinitionError(f"{path}: missing required key '{key}'")
    if not _SAFE_ID.match(str(data["id"])):
        raise TaskDefinitionError(f"{path}: id {data['id']!r} must use only letters, digits, '_', '-', '.'")
    if ("metric" in data) == ("grade_fn" in data):
        raise TaskDefinitionError(f"{path}: give exactly one of 'metric' (a library name) or 'grade_fn'")
    return data


def _read_answers(path: Path, id_column: str, target_column: str, integer: bool) -> pd.DataFrame:
    if not path.is_file():
        raise TaskDefinitionError(f"answers CSV not found: {path}")
    answers = pd.read_csv(path, dtype={id_column: str}, encoding="utf-8")
    missing = [c for c in (id_column, target_column) if c not in answers.columns]
    if missing:
        raise TaskDefinitionError(f"{path}: missing column(s) {missing}; it has {list(answers.columns)}")
    answers[id_column] = answers[id_column].str.strip()
    target = pd.to_numeric(answers[target_column], errors="coerce")
    bad = target.isna() | (integer & (target != target.round()))
    if bad.any():
        rows = (answers.index[bad] + 2).tolist()[:5]
        kind = "an integer" if integer else "a number"
        raise TaskDefinitionError(
            f"{path}: '{target_column}' is not {kind} in row(s) {rows} (header is row 1)"
        )
    answers[target_column] = target.astype("int64") if integer else target.astype(float)
    return answers


def load_task_file(path: Path | str) -> Task:
    """Build a Task from a YAML/JSON description; every problem raises TaskDefinitionError."""
    path = Path(path).resolve()
    data = _read_description(path)
    base = path.parent
    id_column = str(data.get("id_column", "benchmark_id"))
    target_column = str(data.get("target_column", "truth_label"))
    labels = data.get("labels")
    if labels is not None and (not isinstance(labels, list) or not all(isinstance(v, int) for v in labels)):
        raise TaskDefinitionError(f"{path}: 'labels' must be a list of integers, got {labels!r}")
    try:
        answers = _read_answers(base / str(data["answers"]), id_column, target_column, labels is not None)
        if "metric" in data:
            from giant_assets.grading.metrics import get_metric  # scipy/sklearn only when needed

            metric = get_metric(str(data["metric"]))
            grader = Grader(
                metric.name,
                AlignedMetric(metric, id_column, target_column),
                bool(data.get("is_lower_better", metric.is_lower_better)),
            )
            as_percent = bool(data.get("score_as_percent", metric.is_fraction))
        else:
            spec = str(data["grade_fn"])
            declared = data.get("is_lower_better")
            grader = Grader(spec, spec, None if declared is None else bool(declared))
            as_percent = bool(data.get("score_as_percent", False))
        leaderboard = read_leaderboard_csv(base / data["leaderboard"]) if data.get("leaderboard") else None
        humans = None
        if data.get("human_baselines"):
            humans = pd.read_csv(base / str(data["human_baselines"]), encoding="utf-8")
            if HUMAN_SCORE_COLUMN not in humans.columns:
                raise ValueError(f"human baselines need a 'score' column; they have {list(humans.columns)}")
        return Task(
            id=str(data["id"]),
            name=str(data.get("name", data["id"])),
            answers=answers,
            grader=grader,
            allowed_labels=tuple(labels) if labels is not None else None,
            leaderboard=leaderboard,
            human_scores=humans,
            id_column=id_column,
            target_column=target_column,
            score_as_percent=as_percent,
        )
    except TaskDefinitionError:
        raise
    except (KeyError, ValueError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else str(exc)
        raise TaskDefinitionError(f"{path}: {message}") from exc

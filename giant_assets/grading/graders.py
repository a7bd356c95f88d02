"""Graders: a scoring function over (submission, answers) plus its direction and leaderboard ranking."""

from __future__ import annotations

import importlib
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from giant_assets.grading.medals import rank_score

logger = logging.getLogger(__name__)
GradeFn = Callable[[pd.DataFrame, pd.DataFrame], float]
PREDICTION_COLUMN = "prediction"


class InvalidSubmissionError(ValueError):
    """Raised by a grade function when the submission cannot be scored (a user error, not a bug)."""


class GradeFnImportError(ValueError):
    """A ``"module:function"`` grade function string that does not resolve to a callable."""


def import_grade_fn(spec: str) -> GradeFn:
    """Resolve ``"package.module:function"`` (dotted attribute paths allowed after the colon)."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise GradeFnImportError(f"grade_fn {spec!r}: expected the form 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise GradeFnImportError(
            f"grade_fn {spec!r}: cannot import module {module_name!r} ({type(exc).__name__}: {exc})"
        ) from exc
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise GradeFnImportError(f"grade_fn {spec!r}: {module_name!r} has no attribute {attr_path!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise GradeFnImportError(f"grade_fn {spec!r}: {attr_path!r} is a {type(obj).__name__}, not callable")
    return obj


class AlignedMetric:
    """Grade function scoring ``metric(y_true, y_pred)`` after aligning predictions to answers by id."""

    def __init__(
        self, metric: Callable[[np.ndarray, np.ndarray], float], id_column: str, target_column: str
    ) -> None:
        self.metric = metric
        self.id_column = id_column
        self.target_column = target_column

    def __call__(self, submission: pd.DataFrame, answers: pd.DataFrame) -> float:
        ids = answers[self.id_column]
        if len(submission) == len(answers) and submission[self.id_column].astype(str).equals(ids.astype(str)):
            # already in the answers' order (validated submissions are): no index to build
            return float(
                self.metric(answers[self.target_column].to_numpy(), submission[PREDICTION_COLUMN].to_numpy())
            )
        predictions = submission.set_index(self.id_column)[PREDICTION_COLUMN]
        aligned = predictions.reindex(answers[self.id_column].to_numpy())
        if aligned.isna().any():
            missing = answers[self.id_column][aligned.isna().to_numpy()].head(5).tolist()
            raise InvalidSubmissionError(
                f"no prediction for {int(aligned.isna().sum())} item(s), e.g. {missing}"
            )
        return float(self.metric(answers[self.target_column].to_numpy(), aligned.to_numpy()))

    def __repr__(self) -> str:
        name = getattr(self.metric, "name", getattr(self.metric, "__name__", repr(self.metric)))
        return f"AlignedMetric({name}, id={self.id_column!r}, target={self.target_column!r})"


class Grader:
    """A named scoring function, as biomlbench's ``Grader(name, grade_fn)``.

    ``grade_fn`` is a callable or a ``"module:function"`` import string. Calling the grader returns the
    score rounded to ``decimals`` (5, as upstream; None keeps full precision), or None for an invalid
    submission (the grade function raised InvalidSubmissionError, or returned a non-number or a
    non-finite value). The score direction comes from the leaderboard's order, as upstream: lower is
    better when its first score is below its last. ``is_lower_better`` given here is the direction used
    without a leaderboard (or with a constant one); a leaderboard ordered the other way is an error.
    """

    def __init__(
        self,
        name: str,
        grade_fn: GradeFn | str,
        is_lower_better: bool | None = None,
        decimals: int | None = 5,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"grader name must be a non-empty string, got {name!r}")
        if isinstance(grade_fn, str):
            grade_fn = import_grade_fn(grade_fn)
        elif not callable(grade_fn):
            raise GradeFnImportError(f"grader {name!r}: grade_fn {grade_fn!r} is not callable")
        self.name = name
        self.grade_fn: GradeFn = grade_fn
        self.declared_lower_better = None if is_lower_better is None else bool(is_lower_better)
        self.decimals = decimals

    def is_lower_better(self, leaderboard: pd.DataFrame | None = None) -> bool:
        """Lower is better when the leaderboard's first score is below its last (upstream's rule)."""
        declared = self.declared_lower_better
        if leaderboard is None or len(leaderboard) == 0 or "score" not in leaderboard.columns:
            return bool(declared)
        scores = pd.to_numeric(leaderboard["score"], errors="coerce")
        top, bottom = scores.iloc[0], scores.iloc[-1]
        if top == bottom:
            return bool(declared)
        from_order = bool(top < bottom)
        if declared is not None and declared != from_order:
            raise ValueError(
                f"grader {self.name!r}: the leaderboard is ordered {'lowest' if from_order else 'highest'} "
                f"score first, but the task says {'lower' if declared else 'higher'} is better; "
                "store leaderboards best first"
            )
        return from_order

    def score(self, submission_df: pd.DataFrame, answers_df: pd.DataFrame) -> float:
        """The rounded score; raises InvalidSubmissionError saying why the submission cannot be scored."""
        score = self.grade_fn(submission_df, answers_df)
        try:
            value = float(score)
        except (TypeError, ValueError):
            raise InvalidSubmissionError(f"grader {self.name!r} returned {score!r}, not a number") from None
        if not math.isfinite(value):
            raise InvalidSubmissionError(
                f"grader {self.name!r} returned {value} (undefined for this submission, "
                "e.g. constant predictions for a correlation metric)"
            )
        return round(value, self.decimals) if self.decimals is not None else value

    def __call__(self, submission_df: pd.DataFrame, answers_df: pd.DataFrame) -> float | None:
        """The score rounded to ``decimals``, or None for an invalid submission (upstream's contract)."""
        try:
            return self.score(submission_df, answers_df)
        except InvalidSubmissionError as exc:
            logger.warning("invalid submission: %s", exc)
            return None

    def rank_score(self, score: float | None, leaderboard: pd.DataFrame) -> dict:
        """Medal thresholds and flags, above-median, position and percentile of ``score`` on a leaderboard."""
        return rank_score(score, leaderboard, self.is_lower_better(leaderboard))

    @staticmethod
    def from_dict(data: dict) -> Grader:
        return Grader(**data)

    def __repr__(self) -> str:
        return f"Grader({self.name!r}, {self.grade_fn!r}, is_lower_better={self.declared_lower_better})"

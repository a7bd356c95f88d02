"""The per-task grading report and its tabular form."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from giant_assets.core.files import atomic_write_bytes


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class TaskReport:
    """Result of grading one submission for one task (medal fields are False without a leaderboard).

    Carries every field of biomlbench's TaskReport (``submission_exists``, ``leaderboard_position``,
    ``leaderboard_percentile``, ``leaderboard_size``, ...) plus the metric, item count and error text.
    """

    task_id: str
    submission_path: str
    score: float | None = None
    gold_threshold: float | None = None
    silver_threshold: float | None = None
    bronze_threshold: float | None = None
    median_threshold: float | None = None
    gold_medal: bool = False
    silver_medal: bool = False
    bronze_medal: bool = False
    any_medal: bool = False
    above_median: bool | None = None
    beats_human: bool | None = None
    human_percentile: float | None = None
    created_at: str = field(default_factory=utc_now_iso)
    valid_submission: bool = False
    error: str | None = None
    n_items: int = 0
    is_lower_better: bool = False
    metric: str = ""
    score_as_percent: bool = False
    leaderboard_position: int | None = None
    leaderboard_size: int = 0
    leaderboard_percentile: float | None = None
    submission_exists: bool = True

    @property
    def rank(self) -> int | None:
        """The position the score takes on the leaderboard (``leaderboard_position``)."""
        return self.leaderboard_position

    @property
    def medal(self) -> str:
        """``gold``, ``silver``, ``bronze`` or ``none``."""
        for name in ("gold", "silver", "bronze"):
            if getattr(self, f"{name}_medal"):
                return name
        return "none"

    def to_dict(self) -> dict:
        """Plain JSON-serialisable values (Python bool/int/float/str/None)."""
        return {k: _plain(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> TaskReport:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "rank" in data and "leaderboard_position" not in data:  # reports written before the rename
            values["leaderboard_position"] = data["rank"]
        return cls(**values)


def _plain(value: object) -> object:
    """numpy scalars to Python scalars (``item()``), everything else unchanged."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


_FRAME_DTYPES = {
    **dict.fromkeys(
        ("score", "gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold"), "float64"
    ),
    **dict.fromkeys(("human_percentile", "leaderboard_percentile"), "float64"),
    **dict.fromkeys(("above_median", "beats_human"), "boolean"),
    "leaderboard_position": "Int64",
    "rank": "Int64",
}


def reports_to_frame(reports: Sequence[TaskReport]) -> pd.DataFrame:
    """One row per report, columns in TaskReport field order plus ``medal`` and ``rank``, with fixed dtypes
    (nullable floats/booleans/ints), so tables of different partitions always share one schema."""
    columns = [f.name for f in fields(TaskReport)] + ["medal", "rank"]
    rows = [{**r.to_dict(), "medal": r.medal, "rank": r.rank} for r in reports]
    return pd.DataFrame(rows, columns=columns).astype(_FRAME_DTYPES)


def write_json(path: Path | str, payload: Any) -> Path:
    """Write ``payload`` as indented JSON atomically (temp file + rename), with the permissions a plain
    ``open(path, "w")`` would give under the user's umask (0644 under umask 022), never 0600."""
    path = Path(path)
    text = json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path

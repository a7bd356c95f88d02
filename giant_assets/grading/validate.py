"""Validating submissions, streamed chunk by chunk, with one specific message per kind of problem.

A submission is a UTF-8 CSV with columns ``<id column>,prediction`` (``benchmark_id,prediction`` for
MultiPathQA; extra columns are ignored), or JSONL with one object per line carrying the task
(``task_id`` or ``benchmark_name``), ``benchmark_id`` and ``prediction``. A CSV may also carry a
``task_id``/``benchmark_name`` column; rows of other tasks are then ignored when grading one task.

Memory is bounded by the task, not the file: a ``TaskChecker`` keeps one slot per answer item (the
prediction and the row it came from) and the first ``MAX_LISTED`` examples of each problem, and the
file is read in chunks (see ``reader``). Duplicates are detected among the task's ids; an id that is
not in the task is reported as unknown (repeats of it are not tracked).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from giant_assets.grading.graders import PREDICTION_COLUMN
from giant_assets.grading.labels import allowed_description, parse_predictions
from giant_assets.grading.reader import (
    LINE_COLUMN,
    MAX_LISTED,
    TASK_COLUMN,
    SubmissionFileError,
    open_submission,
)
from giant_assets.grading.tasks import Task

__all__ = ["SubmissionFileError", "TaskChecker", "load_submission", "validate_submission"]


@dataclass
class Examples:
    """A count of problems and the first MAX_LISTED of them."""

    count: int = 0
    items: list[str] = field(default_factory=list)

    def add(self, items: list[str], count: int | None = None) -> None:
        self.count += len(items) if count is None else count
        self.items.extend(items[: MAX_LISTED - len(self.items)])

    def listing(self) -> str:
        more = f", … and {self.count - len(self.items)} more" if self.count > len(self.items) else ""
        return ", ".join(self.items) + more


_HASH_BLOCK = 65_536


class IdLookup:
    """Positions of ids among the task's ids through sorted 64-bit hashes: about 24 bytes per item, no
    index of Python strings. Every hit is verified against the real id; a hash collision among the
    task's own ids (practically never) falls back to a pandas Index."""

    def __init__(self, ids: pd.Series) -> None:
        self.ids = ids.reset_index(drop=True)
        blocks = [self._hash(self.ids.iloc[i : i + _HASH_BLOCK]) for i in range(0, len(ids), _HASH_BLOCK)]
        hashes = np.concatenate(blocks) if blocks else np.empty(0, dtype=np.uint64)
        order = np.argsort(hashes, kind="stable")
        self.sorted = hashes[order]
        del hashes
        self.order = order.astype(np.int32 if len(order) < 2**31 else np.int64)
        self.fallback = pd.Index(self.ids) if (np.diff(self.sorted) == 0).any() else None

    @staticmethod
    def _hash(values: pd.Series) -> np.ndarray:
        return pd.util.hash_array(values.to_numpy(dtype=object), categorize=False)

    def positions(self, values: pd.Series) -> np.ndarray:
        """Position of each value among the ids, -1 where absent."""
        if self.fallback is not None:
            return self.fallback.get_indexer(values)
        if not len(self.sorted) or not len(values):
            return np.full(len(values), -1, dtype=np.int64)
        h = self._hash(values)
        i = np.minimum(np.searchsorted(self.sorted, h), len(self.sorted) - 1)
        pos = np.where(self.sorted[i] == h, self.order[i], -1)
        hit = pos >= 0
        if hit.any():
            same = self.ids.iloc[pos[hit]].to_numpy(dtype=object) == values.to_numpy(dtype=object)[hit]
            pos[np.flatnonzero(hit)[~same]] = -1
        return pos


def _where(unit: str, lines: pd.Series) -> list[str]:
    return [f"{unit} {int(n)}" for n in lines]


class TaskChecker:
    """Accumulates one task's rows chunk by chunk; ``finish()`` gives the frame or every problem."""

    def __init__(self, task: Task, unit: str, source: str, columns: list[str] = ()) -> None:
        self.task, self.unit, self.source = task, unit, source
        self.idc = task.id_column
        self.required = [self.idc, PREDICTION_COLUMN]
        self.ids = task.answers[self.idc].astype(str)
        self.lookup = IdLookup(self.ids)
        n = len(self.ids)
        self.first_line = np.zeros(n, dtype=np.int64 if n >= 2**31 else np.int32)  # 0: no row yet
        self.is_label_task = bool(task.options_column) or task.allowed_labels is not None
        self.values = np.zeros(n, dtype=np.int64 if self.is_label_task else np.float64)
        self.columns_seen: dict[str, None] = dict.fromkeys(
            c for c in columns if c not in (LINE_COLUMN, TASK_COLUMN)
        )
        self.n_rows = 0
        self.no_value = {c: Examples() for c in self.required}
        self.empty_id, self.unknown, self.bad = Examples(), Examples(), Examples()
        self.duplicates: dict[str, list[int]] = {}  # first MAX_LISTED duplicated ids -> their rows
        self.n_duplicated = 0
        self.duplicated = np.zeros(n, dtype=bool)

    def add(self, rows: pd.DataFrame) -> None:
        """Check one chunk of this task's rows (text cells and LINE_COLUMN)."""
        self.columns_seen.update(
            dict.fromkeys(c for c in rows.columns if c not in (LINE_COLUMN, TASK_COLUMN))
        )
        if rows.empty:
            return
        self.n_rows += len(rows)
        idc, lines = self.idc, rows[LINE_COLUMN].astype(np.int64)
        cells = {
            c: rows[c] if c in rows.columns else pd.Series(None, index=rows.index, dtype=object)
            for c in self.required
        }
        for col in self.required:
            if col == PREDICTION_COLUMN and self.is_label_task:
                continue  # an absent prediction is an abstention (scored wrong), see labels.parse_predictions
            absent = cells[col].isna().to_numpy()
            if absent.any():
                self.no_value[col].add(_where(self.unit, lines[absent]))
        ids = cells[idc].fillna("").astype(str).str.strip()
        has_id = ids.ne("").to_numpy()
        empty = ~has_id & cells[idc].notna().to_numpy()
        if empty.any():
            self.empty_id.add(_where(self.unit, lines[empty]))
        pos = self.lookup.positions(ids)
        unknown = has_id & (pos < 0)
        if unknown.any():
            bad_ids, bad_lines = ids[unknown].tolist(), lines[unknown].tolist()
            self.unknown.add(
                [f"{i!r} ({self.unit} {n})" for i, n in zip(bad_ids[:MAX_LISTED], bad_lines, strict=False)],
                len(bad_ids),
            )
        known = pos >= 0
        first_in_chunk = known & ~pd.Series(pos).duplicated().to_numpy()
        new = first_in_chunk.copy()
        new[first_in_chunk] = self.first_line[pos[first_in_chunk]] == 0
        self.first_line[pos[new]] = lines[new].to_numpy()
        self._record_duplicates(pos[known & ~new], lines[known & ~new].to_numpy(), ids[known & ~new].tolist())
        predictions = cells[PREDICTION_COLUMN]
        judged = new & (predictions.notna().to_numpy() | self.is_label_task)
        if not judged.any():
            return
        parsed, problem = parse_predictions(self.task, ids[judged], predictions[judged])
        ok = problem.eq("").to_numpy()
        self.values[pos[judged][ok]] = parsed.to_numpy()[ok]
        if (~ok).any():
            self._record_bad(ids[judged][~ok], predictions[judged][~ok], problem[~ok], lines[judged][~ok])

    def _record_duplicates(self, pos: np.ndarray, lines: np.ndarray, ids: list[str]) -> None:
        for p, line, id_ in zip(pos, lines, ids, strict=True):
            if not self.duplicated[p]:
                self.duplicated[p] = True
                self.n_duplicated += 1
                if len(self.duplicates) < MAX_LISTED:
                    self.duplicates[id_] = [int(self.first_line[p])]
            if id_ in self.duplicates and len(self.duplicates[id_]) < 10:
                self.duplicates[id_].append(int(line))

    def _record_bad(self, ids: pd.Series, cells: pd.Series, problems: pd.Series, lines: pd.Series) -> None:
        allowed = allowed_description(self.task)
        items = [
            f"{self.unit} {n} ({self.idc}={i!r}): prediction {str(c)!r} {p}; allowed: {allowed}"
            for i, c, p, n in zip(ids.iloc[:MAX_LISTED], cells, problems, lines, strict=False)
        ]
        self.bad.add(items, len(ids))

    def finish(self) -> tuple[pd.DataFrame | None, list[str]]:
        """``(submission frame, [])`` or ``(None, problems)``; the frame is in the answers' order."""
        source, idc = self.source, self.idc
        found = list(self.columns_seen)
        missing_cols = [c for c in self.required if c not in self.columns_seen]
        if missing_cols:
            kind = "column(s)" if self.unit == "row" else "field(s)"
            return None, [
                f"{source}: missing required {kind} {missing_cols}; required: {self.required}, found: {found}"
            ]
        if self.n_rows == 0:
            return None, [
                f"{source}: no submission rows for task {self.task.id!r} (it has {self.task.n_items} items)"
            ]
        problems = [
            f"{source}: no '{c}' value in {ex.listing()}" for c, ex in self.no_value.items() if ex.count
        ]
        if self.empty_id.count:
            problems.append(f"{source}: empty {idc} in {self.empty_id.listing()}")
        if self.n_duplicated:
            shown = Examples(
                self.n_duplicated,
                [f"{k!r} ({', '.join(f'{self.unit} {n}' for n in v)})" for k, v in self.duplicates.items()],
            )
            problems.append(f"{source}: {self.n_duplicated} duplicate {idc} value(s): {shown.listing()}")
        if self.unknown.count:
            problems.append(
                f"{source}: {self.unknown.count} {idc} value(s) not in task {self.task.id!r}: "
                f"{self.unknown.listing()}"
            )
        absent = self.first_line == 0
        if absent.any():
            names = [repr(i) for i in self.ids[absent][:MAX_LISTED]]
            problems.append(
                f"{source}: {int(absent.sum())} of {self.task.n_items} {idc}(s) of task {self.task.id!r} "
                f"have no prediction, e.g. {Examples(int(absent.sum()), names).listing()}"
            )
        if self.bad.count:
            more = (
                f"\n… and {self.bad.count - MAX_LISTED} more bad prediction(s)"
                if self.bad.count > MAX_LISTED
                else ""
            )
            problems.append(
                f"{source}: {self.bad.count} invalid prediction(s):\n" + "\n".join(self.bad.items) + more
            )
        if problems:
            return None, problems
        return pd.DataFrame({idc: self.ids, PREDICTION_COLUMN: self.values}), []


def rows_for_task(rows: pd.DataFrame, task_id: str) -> pd.DataFrame:
    """Rows naming ``task_id`` or no task at all (every row when the file has no task column)."""
    if TASK_COLUMN not in rows.columns:
        return rows
    named = rows[TASK_COLUMN].fillna("").astype(str).str.strip()
    return rows[named.eq(task_id) | named.eq("")]


def check_file(path: Path | str, task: Task) -> tuple[pd.DataFrame | None, list[str]]:
    """Stream ``path`` through a TaskChecker for ``task``; a file-level problem is the only problem."""
    try:
        sub = open_submission(path)
        checker = TaskChecker(task, sub.unit, sub.path.name, sub.columns)
        for chunk in sub.chunks():
            checker.add(rows_for_task(chunk, task.id))
    except SubmissionFileError as exc:
        return None, [str(exc)]
    return checker.finish()


def load_submission(path: Path | str, task: Task) -> pd.DataFrame:
    """The validated submission frame for ``task``; raises SubmissionFileError listing every problem."""
    frame, problems = check_file(path, task)
    if frame is None:
        raise SubmissionFileError("\n".join(problems))
    return frame


def validate_submission(path: Path | str, task: Task) -> tuple[bool, str]:
    """``(True, summary)`` for a gradable submission, else ``(False, every problem found)``."""
    try:
        frame = load_submission(path, task)
    except SubmissionFileError as exc:
        return False, str(exc)
    return True, f"{Path(path).name}: valid submission for task {task.id!r} ({len(frame)} predictions)"

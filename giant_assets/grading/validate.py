"""Reading and validating submission files, with one specific message per kind of problem.

A submission is a UTF-8 CSV with columns ``<id column>,prediction`` (``benchmark_id,prediction`` for
MultiPathQA; extra columns are ignored), or JSONL with one object per line carrying the task
(``task_id`` or ``benchmark_name``), ``benchmark_id`` and ``prediction``. A CSV may also carry a
``task_id``/``benchmark_name`` column; rows of other tasks are then ignored when grading one task.
CSV rows are numbered as a spreadsheet shows them (the header is row 1); JSONL lines from 1.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from giant_assets.grading.graders import PREDICTION_COLUMN
from giant_assets.grading.labels import allowed_description, parse_predictions
from giant_assets.grading.tasks import Task

SUPPORTED_EXTENSIONS = (".csv", ".jsonl")
TASK_FIELDS = ("task_id", "benchmark_name")  # first present wins
TASK_COLUMN = "task_id"
LINE_COLUMN = "_line"
MAX_LISTED = 5


class SubmissionFileError(ValueError):
    """The file cannot be read as a submission at all (missing, empty, not UTF-8, malformed …)."""


@dataclass(frozen=True)
class SubmissionRows:
    """A submission's cells as text; ``LINE_COLUMN`` holds each row's number in the file."""

    path: Path
    rows: pd.DataFrame
    unit: str  # "row" (CSV) or "line" (JSONL)

    @property
    def has_task_column(self) -> bool:
        return TASK_COLUMN in self.rows.columns

    def for_task(self, task_id: str) -> pd.DataFrame:
        """Rows naming ``task_id`` or no task at all (every row when the file has no task column)."""
        if not self.has_task_column:
            return self.rows
        named = self.rows[TASK_COLUMN].fillna("").astype(str).str.strip()
        return self.rows[named.eq(task_id) | named.eq("")]


def _decode(path: Path) -> str:
    data = path.read_bytes()
    if not data.strip():
        raise SubmissionFileError(
            f"{path.name}: the file is empty; expected a header (e.g. 'benchmark_id,prediction') and rows"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise SubmissionFileError(
            f"{path.name}: not UTF-8 text: byte 0x{bad} at offset {exc.start} cannot be decoded "
            f"({exc.reason}); save the file as UTF-8"
        ) from None


def _csv_rows(path: Path, text: str) -> pd.DataFrame:
    try:
        rows = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skip_blank_lines=False)
    except pd.errors.EmptyDataError:
        raise SubmissionFileError(f"{path.name}: the file is empty (no header row)") from None
    except pd.errors.ParserError as exc:
        raise SubmissionFileError(f"{path.name}: malformed CSV: {exc}") from None
    rows.columns = [str(c).strip() for c in rows.columns]
    rows[LINE_COLUMN] = rows.index + 2
    cells = rows.drop(columns=LINE_COLUMN)
    blank = cells.isna().all(axis=1) | cells.fillna("").astype(str).apply(lambda c: c.str.strip()).eq("").all(
        axis=1
    )
    rows = rows[~blank].reset_index(drop=True)
    present = [f for f in TASK_FIELDS if f in rows.columns]
    if present:
        rows[TASK_COLUMN] = rows[present[0]]
    return rows


def _jsonl_text(value: object) -> object:
    """JSON values as cell text: null stays missing, numbers and strings become their text."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


def _jsonl_rows(path: Path, text: str) -> pd.DataFrame:
    records: list[dict] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"line {number}: expected a JSON object, got {type(obj).__name__}")
            continue
        record = {str(k): _jsonl_text(v) for k, v in obj.items()}
        task = next((record[f] for f in TASK_FIELDS if f in record), None)
        if task is not None:
            record[TASK_COLUMN] = task
        records.append({**record, LINE_COLUMN: number})
    if problems:
        more = f"\n… and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise SubmissionFileError(
            f"{path.name}: malformed JSONL:\n" + "\n".join(problems[:MAX_LISTED]) + more
        )
    return pd.DataFrame.from_records(records)


def read_submission_rows(path: Path | str) -> SubmissionRows:
    """Read a .csv or .jsonl submission as text cells; raises SubmissionFileError with the reason."""
    path = Path(path)
    if not path.is_file():
        raise SubmissionFileError(f"{path}: submission file not found")
    ext = path.suffix.lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise SubmissionFileError(
            f"{path.name}: unsupported file extension {ext or '(none)'!r}; "
            f"a submission must be one of {list(SUPPORTED_EXTENSIONS)}"
        )
    text = _decode(path)
    if ext == ".csv":
        return SubmissionRows(path, _csv_rows(path, text), "row")
    return SubmissionRows(path, _jsonl_rows(path, text), "line")


def _listing(items: list[str]) -> str:
    more = f", … and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
    return ", ".join(items[:MAX_LISTED]) + more


def check_rows(
    rows: pd.DataFrame, task: Task, unit: str, source: str
) -> tuple[pd.DataFrame | None, list[str]]:
    """Validate one task's rows; returns ``(submission frame, [])`` or ``(None, problems)``.

    The frame has the task's id column and ``prediction`` (int64 labels, or floats for numeric tasks).
    """
    idc = task.id_column
    required = [idc, PREDICTION_COLUMN]
    found = [c for c in rows.columns if c not in (LINE_COLUMN, TASK_COLUMN)]
    missing_cols = [c for c in required if c not in rows.columns]
    if missing_cols:
        kind = "column(s)" if unit == "row" else "field(s)"
        return None, [
            f"{source}: missing required {kind} {missing_cols}; required: {required}, found: {found}"
        ]
    if rows.empty:
        return None, [f"{source}: no submission rows for task {task.id!r} (it has {task.n_items} items)"]
    where = rows[LINE_COLUMN].astype(int).astype(str).radd(f"{unit} ")
    problems: list[str] = []
    is_label_task = bool(task.options_column) or task.allowed_labels is not None
    for col in required:
        if col == PREDICTION_COLUMN and is_label_task:
            continue  # an absent prediction is an abstention (scored wrong), see labels.parse_predictions
        absent = rows[col].isna()
        if absent.any():
            problems.append(f"{source}: no '{col}' value in {_listing(where[absent].tolist())}")
    ids = rows[idc].fillna("").astype(str).str.strip()
    empty_id = ids.eq("") & rows[idc].notna()
    if empty_id.any():
        problems.append(f"{source}: empty {idc} in {_listing(where[empty_id].tolist())}")
    has_id = ids.ne("")
    dup = ids.duplicated(keep=False) & has_id
    if dup.any():
        groups = where[dup].groupby(ids[dup], sort=False).agg(lambda s: ", ".join(s))
        listed = [f"{k!r} ({v})" for k, v in groups.items()]
        problems.append(f"{source}: {len(listed)} duplicate {idc} value(s): {_listing(listed)}")
    known_ids = task.answers[idc].astype(str)
    unknown = has_id & ~ids.isin(known_ids)
    if unknown.any():
        listed = [f"{i!r} ({w})" for i, w in zip(ids[unknown], where[unknown], strict=True)]
        problems.append(f"{source}: {len(listed)} {idc} value(s) not in task {task.id!r}: {_listing(listed)}")
    absent_ids = known_ids[~known_ids.isin(ids)]
    if len(absent_ids):
        problems.append(
            f"{source}: {len(absent_ids)} of {task.n_items} {idc}(s) of task {task.id!r} have no prediction, "
            f"e.g. {_listing([repr(i) for i in absent_ids])}"
        )
    judged = has_id & ~unknown & (rows[PREDICTION_COLUMN].notna() | is_label_task)
    parsed, label_problem = parse_predictions(task, ids[judged], rows.loc[judged, PREDICTION_COLUMN])
    bad = label_problem.ne("")
    if bad.any():
        allowed = allowed_description(task)
        cells = rows.loc[bad[bad].index, PREDICTION_COLUMN].astype(str)
        lines = [
            f"{where[i]} ({idc}={ids[i]!r}): prediction {cells[i]!r} {label_problem[i]}; allowed: {allowed}"
            for i in cells.index[:MAX_LISTED]
        ]
        more = (
            f"\n… and {int(bad.sum()) - MAX_LISTED} more bad prediction(s)" if bad.sum() > MAX_LISTED else ""
        )
        problems.append(f"{source}: {int(bad.sum())} invalid prediction(s):\n" + "\n".join(lines) + more)
    if problems:
        return None, problems
    return pd.DataFrame({idc: ids.to_numpy(), PREDICTION_COLUMN: parsed.to_numpy()}), []


def load_submission(path: Path | str, task: Task) -> pd.DataFrame:
    """The validated submission frame for ``task``; raises SubmissionFileError listing every problem."""
    sub = read_submission_rows(path)
    frame, problems = check_rows(sub.for_task(task.id), task, sub.unit, sub.path.name)
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

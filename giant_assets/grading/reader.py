"""Streaming submission files: CSV rows or JSONL lines as chunks of text cells, in bounded memory.

A submission is a UTF-8 CSV with a header, or JSONL with one object per line. Neither is ever read whole:
``SubmissionFile.chunks()`` yields DataFrames of at most ``CHUNK_ROWS`` CSV rows or ``JSONL_CHUNK_LINES``
lines (text cells, object dtype)
with the row's number in ``LINE_COLUMN`` (CSV rows numbered as a spreadsheet shows them, the header is
row 1; JSONL lines from 1) and the row's task, when it names one, in ``TASK_COLUMN``.

Limits and policies (each a ``SubmissionFileError`` naming the file, row/line and byte offset):

* bytes that are not UTF-8 (a BOM is allowed): the line number and byte offset of the first bad byte;
* a CSV row whose number of fields differs from the header's (e.g. an extra field in the first data
  row, which pandas would silently read as an index column): "wrong number of fields";
* a CSV field longer than Python's csv limit (131,072 characters);
* a JSONL line longer than ``MAX_LINE_BYTES`` (1 MiB) or nested deeper than 64 levels.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from giant_assets.judges.safe_json import JsonLimitError, loads

SUPPORTED_EXTENSIONS = (".csv", ".jsonl")
TASK_FIELDS = ("task_id", "benchmark_name")  # first present wins
TASK_COLUMN = "task_id"
LINE_COLUMN = "_line"
CHUNK_ROWS = 50_000
JSONL_CHUNK_LINES = 10_000  # a line becomes a dict of Python objects: smaller chunks, same bound
MAX_LINE_BYTES = 1 << 20
MAX_LISTED = 5


class SubmissionFileError(ValueError):
    """The file cannot be read as a submission at all (missing, empty, not UTF-8, malformed …)."""


def _decoded_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each physical line, decoded strictly; errors name line and byte offset."""
    offset = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                start = exc.start + (3 if number == 1 and raw.startswith(b"\xef\xbb\xbf") else 0)
                raise SubmissionFileError(
                    f"{path.name}: not UTF-8 text: byte 0x{raw[start]:02x} at offset {offset + start} (line "
                    f"{number}) cannot be decoded ({exc.reason}); save the file as UTF-8"
                ) from None
            offset += len(raw)
            yield number, text


def _jsonl_text(value: object) -> object:
    """JSON values as cell text: null stays missing, numbers and strings become their text."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class SubmissionFile:
    """An opened (validated, not yet read) submission; ``chunks()`` streams its rows."""

    path: Path
    unit: str  # "row" (CSV) or "line" (JSONL)
    columns: list[str] = field(default_factory=list)  # CSV header (stripped); JSONL: first line's keys
    has_task_column: bool = False

    def chunks(self) -> Iterator[pd.DataFrame]:
        yield from (self._csv_chunks() if self.unit == "row" else self._jsonl_chunks())

    def _frame(self, records: list, columns: list[str] | None) -> pd.DataFrame:
        frame = pd.DataFrame.from_records(records, columns=columns).astype(object)
        if self.unit == "line" and frame.empty:
            frame = pd.DataFrame(columns=[LINE_COLUMN])
        present = [f for f in TASK_FIELDS if f in frame.columns]
        if present and self.unit == "row":
            frame[TASK_COLUMN] = frame[present[0]]
        return frame

    def _csv_chunks(self) -> Iterator[pd.DataFrame]:
        lines = _decoded_lines(self.path)
        reader = csv.reader((text for _, text in lines), strict=True)
        columns = [*self.columns, LINE_COLUMN]
        records: list[list] = []
        try:
            next(reader)  # the header, read by open_submission
            for number, row in enumerate(reader, start=2):
                if not any(cell.strip() for cell in row):
                    continue  # blank row
                if len(row) != len(self.columns):
                    raise SubmissionFileError(
                        f"{self.path.name}: row {number} (line {reader.line_num}) has {len(row)} field(s) "
                        f"but the header has {len(self.columns)} ({', '.join(self.columns)}): "
                        "wrong number of fields; quote values that contain commas"
                    )
                records.append([*row, number])
                if len(records) >= CHUNK_ROWS:
                    yield self._frame(records, columns)
                    records = []
        except csv.Error as exc:
            raise SubmissionFileError(
                f"{self.path.name}: malformed CSV at line {reader.line_num}: {exc}"
            ) from None
        if records:
            yield self._frame(records, columns)

    def _jsonl_chunks(self) -> Iterator[pd.DataFrame]:
        records: list[dict] = []
        problems: list[str] = []
        n_problems = 0
        with self.path.open("rb") as fh:
            number = 0
            while raw := fh.readline(MAX_LINE_BYTES + 1):
                number += 1
                problem = None
                if len(raw) > MAX_LINE_BYTES:
                    while (rest := fh.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        pass
                    problem = f"line {number}: longer than {MAX_LINE_BYTES:,} bytes"
                elif raw.strip():
                    try:
                        obj = loads(
                            raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw, f"line {number}"
                        )
                    except JsonLimitError as exc:
                        obj, problem = None, str(exc)
                    if problem is None and not isinstance(obj, dict):
                        problem = f"line {number}: expected a JSON object, got {type(obj).__name__}"
                    if problem is None:
                        record = {str(k): _jsonl_text(v) for k, v in obj.items()}
                        task = next((record[f] for f in TASK_FIELDS if f in record), None)
                        if task is not None:
                            record[TASK_COLUMN] = task
                        record[LINE_COLUMN] = number
                        records.append(record)
                if problem is not None:
                    n_problems += 1
                    if len(problems) < MAX_LISTED:
                        problems.append(problem)
                if len(records) >= JSONL_CHUNK_LINES and not n_problems:
                    yield self._frame(records, None)
                    records = []
        if n_problems:
            more = f"\n… and {n_problems - MAX_LISTED} more" if n_problems > MAX_LISTED else ""
            raise SubmissionFileError(f"{self.path.name}: malformed JSONL:\n" + "\n".join(problems) + more)
        if records:
            yield self._frame(records, None)


def _first_jsonl_keys(path: Path) -> list[str]:
    with path.open("rb") as fh:
        while raw := fh.readline(MAX_LINE_BYTES + 1):
            if raw.strip():
                try:
                    obj = loads(raw.removeprefix(b"\xef\xbb\xbf"), "line")
                except JsonLimitError:
                    return []  # reported with its line number when the rows are read
                return [str(k) for k in obj] if isinstance(obj, dict) else []
    return []


def open_submission(path: Path | str) -> SubmissionFile:
    """Check a .csv or .jsonl submission and read its header (CSV) or first line (JSONL)."""
    path = Path(path)
    if not path.is_file():
        raise SubmissionFileError(f"{path}: submission file not found")
    ext = path.suffix.lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise SubmissionFileError(
            f"{path.name}: unsupported file extension {ext or '(none)'!r}; "
            f"a submission must be one of {list(SUPPORTED_EXTENSIONS)}"
        )
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    if not head.strip(b" \t\r\n\xef\xbb\xbf") and path.stat().st_size <= len(head):
        raise SubmissionFileError(
            f"{path.name}: the file is empty; expected a header (e.g. 'benchmark_id,prediction') and rows"
        )
    if ext == ".jsonl":
        keys = _first_jsonl_keys(path)
        return SubmissionFile(path, "line", keys, any(f in keys for f in TASK_FIELDS))
    for _, text in _decoded_lines(path):
        header = next(csv.reader([text]), [])
        if any(cell.strip() for cell in header):
            columns = [c.strip() for c in header]
            return SubmissionFile(path, "row", columns, any(f in columns for f in TASK_FIELDS))
        break
    raise SubmissionFileError(
        f"{path.name}: the first line is empty; expected a header such as 'benchmark_id,prediction'"
    )

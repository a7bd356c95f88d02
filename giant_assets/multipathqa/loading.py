"""Parse and validate a MultiPathQA CSV into canonical items (no slide access here).

Row numbers in messages count the header as row 1, as a spreadsheet shows them.
"""

from __future__ import annotations

import ast
import csv
import io
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.benchmarks import BENCHMARKS, PANDA_GRADES
from giant_assets.multipathqa.prompts import render_prompt
from giant_assets.multipathqa.schema import ITEM_COLUMNS, METRIC_TYPES, REQUIRED_COLUMNS

ROW_COLUMN = "csv_row"  # the row number of each record, as a spreadsheet shows it (header = 1)
PARSED_COLUMNS = ITEM_COLUMNS[: ITEM_COLUMNS.index("is_valid") + 1]  # before slide resolution
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


@dataclass(frozen=True)
class RowError:
    """One problem with one field of one CSV row."""

    file: str
    row: int
    benchmark_id: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: row {self.row} (benchmark_id={self.benchmark_id!r})"
        return f"{where}, field '{self.field}': {self.message}"


class CsvFormatError(ValueError):
    """The CSV cannot be used as it is; the message lists every problem found."""

    def __init__(self, message: str, errors: list[RowError] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


def read_csv_strings(
    path: Path | str,
    *,
    required: tuple[str, ...] = REQUIRED_COLUMNS,
    delimiter: str = ",",
    what: str = "MultiPathQA CSV",
) -> pd.DataFrame:
    """Read the CSV with every cell as text; fail clearly on a missing file, bad encoding, shape or columns.

    The result has one column per header field plus ``csv_row`` (the row number a spreadsheet shows,
    header = 1). Blank lines are skipped. A UTF-8 byte-order mark is allowed. ``required``: the columns
    the header must have; ``delimiter``: ``","``, or ``"\t"`` for a TSV; ``what``: the file in messages.
    """
    path = Path(path)
    if not path.is_file():
        raise CsvFormatError(f"{path}: {what} not found" + (" (a directory)" if path.is_dir() else ""))
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CsvFormatError(f"{path}: not UTF-8 text: {_decode_error_place(data, exc)}") from exc
    try:
        records = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error as exc:
        raise CsvFormatError(f"{path}: malformed CSV: {exc}") from exc
    if not records:
        raise CsvFormatError(f"{path}: the file is empty (no header row)")
    header = [c.strip() for c in records[0]]
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise CsvFormatError(f"{path}: the header repeats column(s) {duplicated}")
    missing = [c for c in required if c not in header]
    if missing:
        raise CsvFormatError(f"{path}: missing required column(s) {missing}; the file has columns {header}")
    rows = [(number, r) for number, r in enumerate(records[1:], start=2) if r and any(c.strip() for c in r)]
    ragged = [
        f"row {n} has {len(r)} fields, the header has {len(header)}" for n, r in rows if len(r) != len(header)
    ]
    if ragged:
        more = f" (and {len(ragged) - 20} more)" if len(ragged) > 20 else ""
        raise CsvFormatError(f"{path}: wrong number of fields: " + "; ".join(ragged[:20]) + more)
    if not rows:
        raise CsvFormatError(f"{path}: the file has a header but no data rows")
    frame = pd.DataFrame([r for _, r in rows], columns=header, dtype=str)
    frame[ROW_COLUMN] = [n for n, _ in rows]
    return frame


def _decode_error_place(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where a UTF-8 error is: row (header = 1), column and byte offset, plus the likely cause."""
    offset = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
    before = data[:offset].decode("utf-8-sig", errors="replace")
    records = list(csv.reader(io.StringIO(before, newline=""))) or [[]]
    if before.endswith(("\n", "\r")) and before.count('"') % 2 == 0:
        records.append([])  # the bad byte starts a new row
    header = [c.strip() for c in records[0]]
    row, column = len(records), len(records[-1]) - 1 if records[-1] else 0
    field = f", field {header[column]!r}" if row > 1 and column < len(header) else ""
    bad = data[offset : offset + 1].hex()
    return (
        f"row {row}{field}, byte offset {offset} (byte 0x{bad}: {exc.reason}); "
        "the file is probably Latin-1/Windows-1252: re-save it as UTF-8"
    )


def parse_options(text: str) -> list[str] | None:
    """Parse the ``options`` cell (a Python list literal) safely; empty means no options."""
    text = text.strip()
    if not text:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not a Python list literal ({type(exc).__name__}): {text[:80]!r}") from None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings, got {type(value).__name__}: {text[:80]!r}")
    if not value:
        raise ValueError("the options list is empty")
    return [str(v) for v in value]


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected True or False, got {text!r}")


def _is_int_text(text: str) -> bool:
    """An optionally negative integer in ASCII digits (not "٣", "³" or "３", which str.isdigit accepts)."""
    digits = text.removeprefix("-")
    return digits.isascii() and digits.isdigit()


def canonical_truth(benchmark_name: str, answer: str, options: list[str] | None) -> int:
    """The canonical integer label: 1-based option index, or the PANDA ISUP grade 0..5."""
    answer = answer.strip()
    if BENCHMARKS[benchmark_name].answer_kind == "grade":
        if _is_int_text(answer) and int(answer) in PANDA_GRADES:
            return int(answer)
        raise ValueError(f"ISUP grade must be an integer 0..5, got {answer!r}")
    if not options:
        raise ValueError(f"benchmark {benchmark_name!r} needs options to interpret the answer")
    if _is_int_text(answer):
        index = int(answer)
        if 1 <= index <= len(options):
            return index
        raise ValueError(f"option index {index} out of range 1..{len(options)}")
    if BENCHMARKS[benchmark_name].answer_kind == "label":
        if answer in options:
            return options.index(answer) + 1
        folded = [o.casefold() for o in options]
        if answer.casefold() in folded:
            return folded.index(answer.casefold()) + 1
        raise ValueError(f"label {answer!r} is not one of the {len(options)} options")
    raise ValueError(f"expected a 1-based option index, got {answer!r}")


def id_problem(benchmark_id: str) -> str | None:
    """Why ``benchmark_id`` cannot be an id (control characters: NUL, tab, newline, ...), or None.

    ``/``, ``\\`` and ``..`` are allowed: every path built from an id encodes it (core/paths.py).
    """
    bad = sorted({c for c in benchmark_id if unicodedata.category(c) == "Cc"})
    if bad:
        return f"contains control character(s) {', '.join(repr(c) for c in bad)}"
    return None


def parse_items(raw: pd.DataFrame, source: str) -> tuple[pd.DataFrame, list[RowError]]:
    """Validate every row; return canonical items (valid rows only) and one error per bad field.

    A ``benchmark_id`` used by more than one row of a benchmark (after stripping whitespace) is an error
    on each of those rows, naming the others: its truth label would be ambiguous.
    """
    errors: list[RowError] = []
    records: list[dict] = []
    has = set(raw.columns)
    row_numbers = raw[ROW_COLUMN].tolist() if ROW_COLUMN in has else range(2, len(raw) + 2)
    for row_number, row in zip(row_numbers, raw.to_dict("records"), strict=True):
        row_number = int(row_number)
        bid = row["benchmark_id"].strip()

        def fail(field: str, message: str, row_number: int = row_number, bid: str = bid) -> None:
            errors.append(RowError(source, row_number, bid, field, message))

        n_before = len(errors)
        name = row["benchmark_name"].strip()
        if name not in BENCHMARKS:
            fail("benchmark_name", f"unknown benchmark {name!r}; expected one of {sorted(BENCHMARKS)}")
        if not bid:
            fail("benchmark_id", "empty")
        elif id_problem(bid):
            fail("benchmark_id", str(id_problem(bid)))
        image_path = row["image_path"].strip()
        if not image_path:
            fail("image_path", "empty")
        metric_type = row["metric_type"].strip()
        if metric_type not in METRIC_TYPES:
            fail("metric_type", f"expected one of {sorted(METRIC_TYPES)}, got {metric_type!r}")
        elif name in BENCHMARKS and metric_type != BENCHMARKS[name].metric_type:
            fail(
                "metric_type",
                f"{metric_type!r} contradicts benchmark {name!r}, which is scored by "
                f"{BENCHMARKS[name].metric_type!r}",
            )
        is_valid = True
        if "is_valid" in has:
            try:
                is_valid = parse_bool(row["is_valid"]) if row["is_valid"].strip() else True
            except ValueError as exc:
                fail("is_valid", str(exc))
        options = None
        try:
            options = parse_options(row["options"])
        except ValueError as exc:
            fail("options", str(exc))
        truth = None
        if len(errors) == n_before:
            try:
                truth = canonical_truth(name, row["answer"], options)
            except ValueError as exc:
                fail("answer", str(exc))
        if len(errors) > n_before:
            continue
        records.append(
            {
                "benchmark_name": name,
                "benchmark_id": bid,
                "row_number": row_number,
                "image_path": image_path,
                "file_id": row.get("file_id", "").strip() or None,
                "prompt_template": row["prompt"],
                "prompt": render_prompt(row["prompt"], options),
                "options": options,
                "n_options": len(options) if options else 0,
                "answer": row["answer"].strip(),
                "truth_label": truth,
                "metric_type": metric_type,
                "is_valid": is_valid,
            }
        )
    duplicates = _duplicate_id_errors(raw, row_numbers, source)
    repeated = {e.row for e in duplicates}
    records = [r for r in records if r["row_number"] not in repeated]
    errors = sorted(errors + duplicates, key=lambda e: e.row)
    items = pd.DataFrame.from_records(records, columns=list(PARSED_COLUMNS))
    items["truth_label"] = items["truth_label"].astype("int64")
    items["row_number"] = items["row_number"].astype("int64")
    return items, errors


def _duplicate_id_errors(raw: pd.DataFrame, row_numbers, source: str) -> list[RowError]:
    """An error for each row whose (benchmark, stripped id) another row also uses."""
    rows_of: dict[tuple[str, str], list[int]] = defaultdict(list)
    for number, name, bid in zip(row_numbers, raw["benchmark_name"], raw["benchmark_id"], strict=True):
        if bid.strip():
            rows_of[(name.strip(), bid.strip())].append(int(number))
    return [
        RowError(
            source,
            row,
            bid,
            "benchmark_id",
            f"duplicate id in benchmark {name!r}: rows {', '.join(map(str, rows))} all use it",
        )
        for (name, bid), rows in rows_of.items()
        if len(rows) > 1
        for row in rows
    ]

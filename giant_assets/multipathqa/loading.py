"""Parse and validate a MultiPathQA CSV into canonical items (no slide access here).

Row numbers in messages count the header as row 1, as a spreadsheet shows them.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.benchmarks import BENCHMARKS, PANDA_GRADES
from giant_assets.multipathqa.prompts import render_prompt
from giant_assets.multipathqa.schema import METRIC_TYPES, REQUIRED_COLUMNS

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


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_csv_strings(path: Path | str) -> pd.DataFrame:
    """Read the CSV with every cell as text; fail clearly on a missing file, bad encoding or columns."""
    path = Path(path)
    if not path.is_file():
        raise CsvFormatError(f"{path}: MultiPathQA CSV not found")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CsvFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except pd.errors.EmptyDataError as exc:
        raise CsvFormatError(f"{path}: the file is empty (no header row)") from exc
    except pd.errors.ParserError as exc:
        raise CsvFormatError(f"{path}: malformed CSV: {exc}") from exc
    raw.columns = [str(c).strip() for c in raw.columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in raw.columns]
    if missing:
        raise CsvFormatError(
            f"{path}: missing required column(s) {missing}; the file has columns {list(raw.columns)}"
        )
    return raw


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


def canonical_truth(benchmark_name: str, answer: str, options: list[str] | None) -> int:
    """The canonical integer label: 1-based option index, or the PANDA ISUP grade 0..5."""
    answer = answer.strip()
    if BENCHMARKS[benchmark_name].answer_kind == "grade":
        if answer.lstrip("-").isdigit() and int(answer) in PANDA_GRADES:
            return int(answer)
        raise ValueError(f"ISUP grade must be an integer 0..5, got {answer!r}")
    if not options:
        raise ValueError(f"benchmark {benchmark_name!r} needs options to interpret the answer")
    if answer.lstrip("-").isdigit():
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


def parse_items(raw: pd.DataFrame, source: str) -> tuple[pd.DataFrame, list[RowError]]:
    """Validate every row; return canonical items (valid rows only) and one error per bad field."""
    errors: list[RowError] = []
    records: list[dict] = []
    has = set(raw.columns)
    for offset, row in enumerate(raw.to_dict("records")):
        row_number = offset + 2  # header is row 1
        bid = row["benchmark_id"].strip()

        def fail(field: str, message: str, row_number: int = row_number, bid: str = bid) -> None:
            errors.append(RowError(source, row_number, bid, field, message))

        n_before = len(errors)
        name = row["benchmark_name"].strip()
        if name not in BENCHMARKS:
            fail("benchmark_name", f"unknown benchmark {name!r}; expected one of {sorted(BENCHMARKS)}")
        if not bid:
            fail("benchmark_id", "empty")
        image_path = row["image_path"].strip()
        if not image_path:
            fail("image_path", "empty")
        metric_type = row["metric_type"].strip()
        if metric_type not in METRIC_TYPES:
            fail("metric_type", f"expected one of {sorted(METRIC_TYPES)}, got {metric_type!r}")
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
    items = pd.DataFrame.from_records(records)
    if items.empty:
        items = pd.DataFrame(columns=list(records[0]) if records else ["benchmark_name", "benchmark_id"])
    else:
        items["truth_label"] = items["truth_label"].astype("int64")
        items["row_number"] = items["row_number"].astype("int64")
    return items, errors

"""A declared benchmark's items file (CSV, TSV or Parquet) -> the canonical items frame the pipeline uses.

The frame has the columns of ``multipathqa.loading.parse_items``: one row per valid question with its
rendered prompt, options and canonical truth label (1-based option index, or the integer grade). Every
bad cell is a :class:`~giant_assets.multipathqa.loading.RowError` naming file, row, id and column.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from giant_assets.benchmarks.declaration import MAX_GRADE, Declaration
from giant_assets.multipathqa.loading import (
    PARSED_COLUMNS,
    ROW_COLUMN,
    CsvFormatError,
    RowError,
    id_problem,
    parse_options,
    read_csv_strings,
)
from giant_assets.multipathqa.prompts import format_options, render_prompt
from giant_assets.multipathqa.wsi import resolve_items

MAX_CELL = 100_000  # characters: a longer cell is refused before it is parsed


def read_item_file(declaration: Declaration) -> pd.DataFrame:
    """The file's cells as text (options may stay a list in Parquet), plus ``csv_row``; the declared
    columns must be present (``options`` only for option answers)."""
    path = declaration.items
    required = tuple(
        column
        for role, column in declaration.columns.items()
        if role != "options" or declaration.answer != "grade"
    )
    what = f"items file of benchmark {declaration.name!r}"
    if path.suffix.lower() != ".parquet":
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        return read_csv_strings(path, required=required, delimiter=delimiter, what=what)
    if not path.is_file():
        raise CsvFormatError(f"{path}: {what} not found" + (" (a directory)" if path.is_dir() else ""))
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises many types for a corrupt or foreign file
        raise CsvFormatError(f"{path}: not a readable Parquet file: {type(exc).__name__}: {exc}") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise CsvFormatError(
            f"{path}: missing column(s) {missing}; the file has columns {list(frame.columns)}"
        )
    if not len(frame):
        raise CsvFormatError(f"{path}: the file has no rows")
    cells = frame[list(required)].astype(object)
    out = pd.DataFrame(
        {c: [_cell_text(v) for v in cells[c]] for c in cells.columns if c != _options(declaration)}
    )
    if _options(declaration) in cells:
        out[_options(declaration)] = list(cells[_options(declaration)])
    out[ROW_COLUMN] = np.arange(1, len(frame) + 1)
    return out


def _options(declaration: Declaration) -> str:
    return declaration.columns["options"]


def _cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return str(value)


def _options_of(value: Any) -> list[str] | None:
    """The options of one cell: a list (Parquet) or the text of a Python/JSON list of strings."""
    if isinstance(value, list | tuple | np.ndarray):
        if len(value) > 1000 or not all(isinstance(v, str) for v in value):
            raise ValueError("expected a list of at most 1000 strings")
        if not len(value):
            raise ValueError("the options list is empty")
        return [str(v) for v in value]
    return parse_options(_cell_text(value))


def _truth(answer_kind: str, answer: str, options: list[str] | None) -> int:
    """The canonical label: 1-based option index (``index``, ``label``) or the integer grade."""
    answer = answer.strip()
    if answer_kind == "grade":
        digits = answer.removeprefix("+")
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 4) or int(digits) > MAX_GRADE:
            raise ValueError(f"expected an integer grade 0..{MAX_GRADE}, got {answer[:40]!r}")
        return int(digits)
    if not options:
        raise ValueError(f"answer: {answer_kind} needs the item's options")
    if answer_kind == "index":
        if not (answer.isascii() and answer.isdigit() and len(answer) <= 4):
            raise ValueError(f"expected a 1-based option number, got {answer[:40]!r}")
        if not 1 <= int(answer) <= len(options):
            raise ValueError(f"option number {int(answer)} out of range 1..{len(options)}")
        return int(answer)
    if answer in options:
        return options.index(answer) + 1
    folded = [i for i, o in enumerate(options, start=1) if o.casefold() == answer.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise ValueError(f"label {answer[:80]!r} is not one of the {len(options)} options")


def render_question(declaration: Declaration, question: str, options: list[str] | None) -> str:
    """The prompt as sent: the declared template filled in, else the platform's own wrapping."""
    if declaration.question_template is None:
        return render_prompt(question, options)
    return declaration.question_template.format(question=question, options=format_options(options or []))


def parse_declared_items(declaration: Declaration, raw: pd.DataFrame) -> tuple[pd.DataFrame, list[RowError]]:
    """Validate every row of ``raw`` (from :func:`read_item_file`); the canonical items and the errors."""
    cols = declaration.columns
    source = str(declaration.items)
    errors: list[RowError] = []
    records: list[dict] = []
    rows_of: dict[str, list[int]] = defaultdict(list)
    for row in raw.to_dict("records"):
        number = int(row[ROW_COLUMN])
        bid = str(row[cols["id"]]).strip()

        def fail(role: str, message: str, number: int = number, bid: str = bid) -> None:
            errors.append(RowError(source, number, bid[:80], cols[role], message))

        n_before = len(errors)
        texts = {role: row[c] for role, c in cols.items() if c in row and role != "options"}
        long = [role for role, text in texts.items() if len(str(text)) > MAX_CELL]
        for role in long:
            fail(role, f"{len(str(texts[role]))} characters, at most {MAX_CELL}")
        if long:
            continue
        if not bid:
            fail("id", "empty")
        elif id_problem(bid):
            fail("id", str(id_problem(bid)))
        else:
            rows_of[bid].append(number)
        slide = str(row[cols["slide"]]).strip()
        if not slide:
            fail("slide", "empty")
        question = str(row[cols["question"]])
        if not question.strip():
            fail("question", "empty")
        options = None
        if cols["options"] in row:
            cell = row[cols["options"]]
            if isinstance(cell, str) and len(cell) > MAX_CELL:
                fail("options", f"{len(cell)} characters, at most {MAX_CELL}")
            elif declaration.answer != "grade" or _cell_text(cell).strip():
                try:
                    options = _options_of(cell)
                except ValueError as exc:
                    fail("options", str(exc))
        truth = None
        if len(errors) == n_before:
            try:
                truth = _truth(declaration.answer, str(row[cols["answer"]]), options)
            except ValueError as exc:
                fail("answer", str(exc))
        if len(errors) > n_before:
            continue
        records.append(
            {
                "benchmark_name": declaration.name,
                "benchmark_id": bid,
                "row_number": number,
                "image_path": slide,
                "file_id": None,
                "prompt_template": question,
                "prompt": render_question(declaration, question, options),
                "options": options,
                "n_options": len(options) if options else 0,
                "answer": str(row[cols["answer"]]).strip(),
                "truth_label": truth,
                "metric_type": declaration.metric,
                "is_valid": True,
            }
        )
    repeated = {n for rows in rows_of.values() if len(rows) > 1 for n in rows}
    for bid, rows in rows_of.items():
        for n in rows if len(rows) > 1 else ():
            message = f"duplicate id: rows {', '.join(map(str, rows))} all use it"
            errors.append(RowError(source, n, bid[:80], cols["id"], message))
    records = [r for r in records if r["row_number"] not in repeated]
    items = pd.DataFrame.from_records(records, columns=list(PARSED_COLUMNS))
    items["truth_label"] = items["truth_label"].astype("int64")
    items["row_number"] = items["row_number"].astype("int64")
    return items, sorted(errors, key=lambda e: e.row)


def load_declared_items(declaration: Declaration) -> tuple[pd.DataFrame, list[RowError]]:
    """Read and validate a declaration's items file (a file-level problem raises ``CsvFormatError``)."""
    return parse_declared_items(declaration, read_item_file(declaration))


def declared_items(
    declarations: dict[str, Declaration],
) -> tuple[pd.DataFrame, list[RowError], dict[str, str]]:
    """Items of every declaration (unresolved), their row errors, and the benchmarks whose file cannot
    be used at all (name -> the reason, naming the file)."""
    frames, errors, unusable = [], [], {}
    for name, declaration in declarations.items():
        try:
            items, row_errors = load_declared_items(declaration)
        except CsvFormatError as exc:
            unusable[name] = str(exc)
            continue
        frames.append(items)
        errors.extend(row_errors)
    items = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(PARSED_COLUMNS))
    return items, errors, unusable


def resolve_by_root(items: pd.DataFrame, roots: dict[str, Path], default_root: Path) -> pd.DataFrame:
    """Slides resolved per benchmark, each under its declared WSI root (else ``default_root``)."""
    if not len(items):
        return resolve_items(items, default_root)
    root_of = items["benchmark_name"].map(lambda b: str(roots.get(b) or default_root))
    parts = [resolve_items(items[root_of == root], Path(root)) for root in dict.fromkeys(root_of)]
    return pd.concat(parts).loc[items.index]

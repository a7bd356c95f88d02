"""A Patho-Bench task folder -> a benchmark declaration (YAML) and its items file (CSV).

Patho-Bench (github mahmoodlab/Patho-Bench; splits on Hugging Face, MahmoodLab/Patho-Bench) publishes a
task as ``<dataset>/<task>/`` holding ``config.yaml`` (``task_col``: the label column, ``label_dict``:
integer label -> class name, ``sample_col``, ``extra_cols``, ``task_type``, ``metrics``, ``datasets``)
and the split ``k=all.tsv`` (``case_id``, ``slide_id``, the label column, ``fold_0`` ... holding
``train``/``val``/``test``). The test rows of one fold become the items, one per slide: the class names
are the options, the question is worded from the task's name and classes. Ordinal tasks (grades) are
declared ``answer: grade`` with ``quadratic_kappa``, the others ``answer: label`` with
``balanced_accuracy``.

Every file is hostile: each problem raises :class:`PathoBenchError` naming the file, row and column.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from giant_assets.benchmarks.declaration import MAX_GRADE, name_problem
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.multipathqa.loading import CsvFormatError, read_csv_strings

CONFIG_FILE = "config.yaml"
SPLIT_FILE = "k=all.tsv"  # Patho-Bench's split of every sample, one fold_<k> column per fold
MAX_CONFIG_BYTES = 1_000_000
MAX_CLASSES = 100
MAX_CLASS_NAME = 200
MAX_SLIDE_ID = 255
SHOWN = 20  # problems listed in one error
FOLD_VALUES = frozenset({"train", "val", "test"})
# extensions OpenSlide opens (openslide.org/formats): a slide is found by its id with any of them
SLIDE_SUFFIXES = (
    ".svs",
    ".tif",
    ".tiff",
    ".ndpi",
    ".vms",
    ".vmu",
    ".scn",
    ".mrxs",
    ".svslide",
    ".bif",
    ".dcm",
)
SCAN_DEPTH = 3  # folders below the WSI root searched for slides
ORDINAL_WORDS = re.compile(r"grade|grading|isup|gleason|stage|staging", re.IGNORECASE)
ITEM_COLUMNS = {"id": "slide_id", "slide": "slide", "question": "question", "options": "options",
                "answer": "answer"}  # fmt: skip


class PathoBenchError(ValueError):
    """The task folder cannot be imported; the message names the file, row and column."""


@dataclass(frozen=True)
class TestRow:
    row: int  # the split file's row as a spreadsheet shows it (header = 1)
    slide_id: str
    case_id: str
    label: int


@dataclass(frozen=True)
class Task:
    """A Patho-Bench task: its names, classes (label -> name, in label order) and test rows."""

    folder: Path
    dataset: str
    task: str
    task_col: str
    fold: str
    classes: dict[int, str]
    ordinal: bool
    rows: tuple[TestRow, ...]
    skipped: int  # test rows without a label (Patho-Bench drops them too)


def _fail(problems: list[str]) -> None:
    if problems:
        more = f"\n... and {len(problems) - SHOWN} more problem(s)" if len(problems) > SHOWN else ""
        raise PathoBenchError("\n".join(problems[:SHOWN]) + more)


def _clean_text(value: Any, limit: int) -> str | None:
    """``value`` as one line of printable text of at most ``limit`` characters, else None."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    if not text or len(text) > limit or any(unicodedata.category(c).startswith("C") for c in text):
        return None
    return text


def _label_key(value: Any) -> int | None:
    """A class label: an integer 0..MAX_GRADE (YAML int or its digits), else None."""
    if isinstance(value, bool):
        return None
    text = str(value).strip() if isinstance(value, int | str) else ""
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or int(text) > MAX_GRADE:
        return None
    return int(text)


def read_config(path: Path) -> dict[str, Any]:
    """The task's ``config.yaml`` as a mapping (a clear error for a missing, huge or broken file)."""
    if not path.is_file():
        raise PathoBenchError(
            f"{path}: the task's {CONFIG_FILE} not found (is this a Patho-Bench task folder?)"
        )
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise PathoBenchError(f"{path}: {path.stat().st_size} bytes, at most {MAX_CONFIG_BYTES}")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise PathoBenchError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise PathoBenchError(f"{path}: not valid YAML: {str(exc)[:300]}") from None
    except (ValueError, RecursionError) as exc:  # an integer of 5,000 digits, a 100,000-deep nesting
        raise PathoBenchError(f"{path}: a value cannot be read: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise PathoBenchError(f"{path}: expected a mapping (task_col, label_dict, sample_col, ...)")
    return doc


def _classes(path: Path, value: Any) -> dict[int, str]:
    """``label_dict`` (label -> class name; also accepted the other way round), sorted by label."""
    if not isinstance(value, dict) or not value:
        raise PathoBenchError(f"{path}: field 'label_dict': expected a mapping of label -> class name")
    if len(value) > MAX_CLASSES:
        raise PathoBenchError(f"{path}: field 'label_dict': {len(value)} classes, at most {MAX_CLASSES}")
    pairs = list(value.items())
    if all(_label_key(k) is None and _label_key(v) is not None for k, v in pairs):
        pairs = [(v, k) for k, v in pairs]  # written as class name -> label
    classes: dict[int, str] = {}
    problems = []
    for key, name in pairs:
        label, text = _label_key(key), _clean_text(name, MAX_CLASS_NAME)
        if label is None:
            problems.append(f"label {str(key)[:40]!r} is not an integer 0..{MAX_GRADE}")
        elif text is None:
            problems.append(
                f"label {label}: class name {str(name)[:40]!r} is not one line of text of 1-{MAX_CLASS_NAME} "
                "characters"
            )
        elif label in classes:
            problems.append(f"label {label} given twice")
        else:
            classes[label] = text
    folded = [n.casefold() for n in classes.values()]
    twice = sorted({n for n in classes.values() if folded.count(n.casefold()) > 1})
    if twice:
        problems.append(f"class name(s) {twice} given to two labels (answers match names case-insensitively)")
    _fail([f"{path}: field 'label_dict': {p}" for p in problems])
    if len(classes) < 2:
        raise PathoBenchError(f"{path}: field 'label_dict': one class only; a question needs two or more")
    return dict(sorted(classes.items()))


def _column_name(path: Path, doc: dict[str, Any], field: str, default: str | None = None) -> str:
    value = doc.get(field, default)
    text = _clean_text(value, 200) if isinstance(value, str) else None
    if text is None:
        raise PathoBenchError(f"{path}: field '{field}': expected a column name, got {str(value)[:80]!r}")
    return text


def is_ordinal(task: str, classes: dict[int, str]) -> bool:
    """A grading task: its name or a class name speaks of grade/stage/ISUP/Gleason and its labels are
    consecutive integers (so that a distance between labels means something)."""
    labels = list(classes)
    consecutive = labels == list(range(labels[0], labels[0] + len(labels)))
    worded = bool(ORDINAL_WORDS.search(task)) or any(ORDINAL_WORDS.search(n) for n in classes.values())
    return consecutive and worded


def _slide_id_problem(slide_id: str) -> str | None:
    if not slide_id:
        return "empty"
    if len(slide_id) > MAX_SLIDE_ID:
        return f"{len(slide_id)} characters, at most {MAX_SLIDE_ID}"
    if any(unicodedata.category(c).startswith("C") for c in slide_id):
        return "contains a control character"
    if "/" in slide_id or "\\" in slide_id or slide_id in (".", "..") or ":" in slide_id:
        return f"{slide_id[:80]!r} is not a file name: a slide id may not hold '/', '\\\\', ':' or be '..'"
    return None


def split_file(folder: Path) -> Path:
    """The task's split: ``k=all.tsv``, else the folder's only ``.tsv``."""
    if (folder / SPLIT_FILE).is_file():
        return folder / SPLIT_FILE
    found = sorted(p for p in folder.glob("*.tsv") if p.is_file())
    if len(found) == 1:
        return found[0]
    what = f"several .tsv files ({', '.join(p.name for p in found)})" if found else "no .tsv file"
    raise PathoBenchError(f"{folder}: the split {SPLIT_FILE} not found, and {what} to use instead")


def read_task(folder: Path | str, fold: str = "fold_0", ordinal: bool | None = None) -> Task:
    """Read and validate a Patho-Bench task folder; ``ordinal``: force (True/False) or detect (None)."""
    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        raise PathoBenchError(f"{folder}: not a directory (give the task folder, <dataset>/<task>)")
    config_path = folder / CONFIG_FILE
    doc = read_config(config_path)
    task_type = doc.get("task_type", "classification")
    if task_type != "classification":
        raise PathoBenchError(
            f"{config_path}: field 'task_type': {str(task_type)[:40]!r}; only classification tasks have "
            "answers a model can give (survival tasks have none)"
        )
    task_col = _column_name(config_path, doc, "task_col")
    sample_col = _column_name(config_path, doc, "sample_col", "case_id")
    classes = _classes(config_path, doc.get("label_dict"))
    datasets = doc.get("datasets")
    dataset = datasets[0] if isinstance(datasets, list) and datasets else folder.parent.name
    dataset = _clean_text(dataset, 200) or folder.parent.name
    task = folder.name
    path = split_file(folder)
    try:
        raw = read_csv_strings(
            path, required=("slide_id", task_col, fold), delimiter="\t", what="Patho-Bench split"
        )
    except CsvFormatError as exc:
        raise PathoBenchError(str(exc)) from None
    case_col = sample_col if sample_col in raw.columns else "case_id"
    rows, problems, seen, skipped = [], [], {}, 0
    for record in raw.to_dict("records"):
        number = int(record["csv_row"])
        where = f"{path}: row {number}"
        split = str(record[fold]).strip()
        if split not in FOLD_VALUES:
            problems.append(f"{where}, column '{fold}': {split[:40]!r} is not one of train, val, test")
            continue
        if split != "test":
            continue
        slide_id = str(record["slide_id"]).strip()
        why = _slide_id_problem(slide_id)
        if why:
            problems.append(f"{where}, column 'slide_id': {why}")
            continue
        if slide_id in seen:
            problems.append(f"{where}, column 'slide_id': {slide_id!r} repeats row {seen[slide_id]}")
            continue
        seen[slide_id] = number
        cell = str(record[task_col]).strip()
        if not cell or cell.lower() == "nan":
            skipped += 1
            continue
        label = _label_key(cell.removesuffix(".0"))  # pandas writes an integer column with NaNs as 1.0
        if label not in classes:
            known = ", ".join(map(str, classes))
            problems.append(
                f"{where}, column '{task_col}': label {cell[:40]!r} is not in label_dict ({known})"
            )
            continue
        case = str(record.get(case_col, slide_id)).strip()
        rows.append(TestRow(number, slide_id, case if case and case != "nan" else slide_id, label))
    _fail(problems)
    if not rows:
        raise PathoBenchError(f"{path}: column '{fold}': no test row with a label (no test split)")
    detected = is_ordinal(task, classes) if ordinal is None else ordinal
    if detected and list(classes) != list(range(min(classes), min(classes) + len(classes))):
        raise PathoBenchError(f"{config_path}: field 'label_dict': grades must be consecutive integers")
    return Task(folder, dataset, task, task_col, fold, classes, detected, tuple(rows), skipped)


def benchmark_name(task: Task) -> str:
    """``<dataset>-<task>``, lower-case, other characters as ``-``, cut to a valid benchmark name."""
    name = re.sub(r"[^a-z0-9_.-]+", "-", f"{task.dataset}-{task.task}".lower()).strip("-_.")[:63]
    name = name.rstrip("-_.") or "patho-bench-task"
    return f"pb-{name}"[:63] if name in BENCHMARK_NAMES or name == "all" else name


def _words(text: str) -> str:
    return re.sub(r"[_\s]+", " ", text).strip()


def question(task: Task) -> str:
    """The question put to the model, from the task's name and classes (the user may edit it)."""
    subject = f"the {_words(task.task)} of this {_words(task.dataset)} whole-slide image"
    if not task.ordinal:
        return f"What is {subject}? Choose one of the options."
    scale = "; ".join(f"{label} = {name}" for label, name in task.classes.items())
    low, high = min(task.classes), max(task.classes)
    return (
        f"What is {subject}? The grades are {scale}. "
        f'Reply with JSON {{"answer": N}}, N the grade from {low} to {high}.'
    )


def find_slides(root: Path, slide_ids: list[str]) -> tuple[dict[str, str], list[str]]:
    """Each id's slide under ``root`` (to :data:`SCAN_DEPTH` folders): ``<id><ext>`` for an OpenSlide
    extension, as a path relative to ``root``; and the ids found twice (two files), as problems."""
    root = root.resolve()
    wanted = set(slide_ids)
    found: dict[str, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if len(rel.parts) >= SCAN_DEPTH:
            dirnames.clear()
        dirnames.sort()
        for name in sorted(filenames):
            stem, suffix = os.path.splitext(name)
            if suffix.lower() in SLIDE_SUFFIXES and stem in wanted:
                found.setdefault(stem, []).append((rel / name).as_posix())
    twice = [f"slide {i!r} found twice under {root}: {', '.join(p)}" for i, p in found.items() if len(p) > 1]
    return {i: p[0] for i, p in found.items() if len(p) == 1}, twice


@dataclass(frozen=True)
class Imported:
    """What :func:`write_declaration` wrote."""

    name: str
    declaration: Path
    items: Path
    n_items: int
    slides_found: int | None  # None: no WSI root searched
    missing: tuple[str, ...]  # slide ids not found under the WSI root


def items_frame(task: Task, slides: dict[str, str]) -> pd.DataFrame:
    """One row per test slide: id, case, slide path, question, options (class names) and answer."""
    options = None if task.ordinal else str(list(task.classes.values()))
    return pd.DataFrame(
        {
            "slide_id": [r.slide_id for r in task.rows],
            "case_id": [r.case_id for r in task.rows],
            "slide": [slides[r.slide_id] for r in task.rows],
            "question": question(task),
            **({} if options is None else {"options": options}),
            "answer": [str(r.label) if task.ordinal else task.classes[r.label] for r in task.rows],
        }
    )


def declaration_text(task: Task, name: str, items: str, wsi_root: Path | None, extension: str) -> str:
    """The experiments file: a baseline experiment and the ``benchmarks:`` entry, with comments."""
    columns = {k: v for k, v in ITEM_COLUMNS.items() if k != "options" or not task.ordinal}
    body: dict[str, Any] = {"items": items, "columns": columns}
    if task.ordinal:
        body |= {"answer": "grade", "metric": "quadratic_kappa"}
    else:
        body |= {"answer": "label", "metric": "balanced_accuracy"}
    if wsi_root is not None:
        body["wsi_root"] = str(wsi_root)
    body["description"] = (
        f"Patho-Bench {task.dataset}/{task.task}, {task.fold} test split ({len(task.rows)} slides)"
    )
    baseline = {"majority": {"agent": "majority"}} if task.ordinal else {"random": {"agent": "random"}}
    doc = yaml.safe_dump(
        {"experiments": baseline, "benchmarks": {name: body}}, sort_keys=False, allow_unicode=True, width=1000
    )
    where = (
        f"# Slides: each item's 'slide' is the file found by its slide_id under wsi_root\n"
        f"# ({_comment(wsi_root)}); after moving the slides, edit wsi_root (or re-import with\n"
        "# --wsi-root DIR)."
        if wsi_root is not None
        else f"# Slides: each item's 'slide' is <slide_id>{extension}, relative to the WSI root. Point the\n"
        "# benchmark at your slides with a 'wsi_root: /path/to/slides' line below (default GIANT_WSI_ROOT),\n"
        "# or re-import with --wsi-root DIR to find each slide by its id with any extension OpenSlide opens."
    )
    return (
        f"# Imported from the Patho-Bench task {_comment(task.folder)}\n"
        "# by giant-benchmarks import-patho-bench.\n"
        "# The question is worded from the task's name and classes: edit it in the items file's 'question'\n"
        "# column, or set question_template. Copy the benchmarks entry into your experiments file, or use\n"
        "# this file as it is (GIANT_EXPERIMENTS=<this file>).\n"
        f"{where}\n{doc}"
    )


def _comment(value: object) -> str:
    """``value`` safe inside a YAML comment line (a path may hold a line break)."""
    return "".join("?" if unicodedata.category(c).startswith("C") else c for c in str(value))


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def write_declaration(
    task: Task,
    out: Path,
    *,
    name: str | None = None,
    wsi_root: Path | None = None,
    extension: str = ".svs",
    force: bool = False,
) -> Imported:
    """Write the declaration ``out`` (YAML) and its items CSV ``<out stem>.csv`` beside it."""
    out = Path(out).expanduser().resolve()
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise PathoBenchError(f"{out}: the declaration is a YAML file: end its name with .yaml")
    name = name or benchmark_name(task)
    why = name_problem(name) or (f"{name!r} is a built-in benchmark" if name in BENCHMARK_NAMES else None)
    if why:
        raise PathoBenchError(f"--name: {why}")
    if extension.lower() not in SLIDE_SUFFIXES:
        raise PathoBenchError(f"--extension: {extension[:20]!r} is not one of {', '.join(SLIDE_SUFFIXES)}")
    items = out.with_suffix(".csv")
    existing = [p for p in (out, items) if p.exists()]
    if existing and not force:
        raise PathoBenchError(f"{existing[0]}: exists; give --force to replace it")
    if not out.parent.is_dir():
        raise PathoBenchError(f"{out.parent}: no such folder for the output")
    ids = [r.slide_id for r in task.rows]
    slides, found = {i: f"{i}{extension}" for i in ids}, None
    missing: list[str] = []
    if wsi_root is not None:
        wsi_root = Path(wsi_root).expanduser().resolve()
        if not wsi_root.is_dir():
            raise PathoBenchError(f"--wsi-root: {wsi_root} is not a directory")
        located, twice = find_slides(wsi_root, ids)
        _fail(twice)
        slides |= located
        found, missing = len(located), [i for i in ids if i not in located]
    items_frame(task, slides).to_csv(items.with_name(f".{items.name}.tmp"), index=False)
    items.with_name(f".{items.name}.tmp").replace(items)
    _write(out, declaration_text(task, name, items.name, wsi_root, extension))
    return Imported(name, out, items, len(ids), found, tuple(missing))

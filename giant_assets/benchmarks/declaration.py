"""One declared benchmark (the ``benchmarks:`` section of the experiments file), validated field by field.

    benchmarks:
      camelyon16-metastasis:
        items: cohorts/camelyon16_test.csv   # CSV, TSV or Parquet; relative to the experiments file
        columns: {id: case_id, slide: slide_path, question: prompt, options: choices, answer: label}
        answer: label              # index (1-based option) | label (option text) | grade (integer)
        metric: balanced_accuracy  # accuracy | balanced_accuracy | f1_macro | quadratic_kappa
        question_template: "{question}\\nOptions:\\n{options}"   # optional
        wsi_root: /data/camelyon16   # optional; default GIANT_WSI_ROOT

Every value is hostile until checked here: a problem raises :class:`DeclarationError` naming the field
(the experiments file loader adds the file and the benchmark).
"""

from __future__ import annotations

import difflib
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from giant_assets.multipathqa.benchmarks import BenchmarkSpec

ANSWER_KINDS = ("index", "label", "grade")
METRIC_NAMES = ("accuracy", "balanced_accuracy", "f1_macro", "quadratic_kappa")
ORDINAL_METRICS = frozenset({"quadratic_kappa"})  # only meaningful for ordinal grades
ITEM_SUFFIXES = (".csv", ".tsv", ".parquet")
NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")  # a partition key and a file name: no '|', '/', '..'
RESERVED_NAMES = frozenset({"all"})  # the inventory's row over every benchmark
DEFAULT_COLUMNS: dict[str, str] = {  # MultiPathQA's column names
    "id": "benchmark_id",
    "slide": "image_path",
    "question": "prompt",
    "options": "options",
    "answer": "answer",
}
FIELDS = ("items", "columns", "answer", "metric", "question_template", "wsi_root", "description")
REQUIRED_FIELDS = ("items", "answer", "metric")
TEMPLATE_FIELDS = frozenset({"question", "options"})
MAX_TEXT = 4096  # longest path, column name or description accepted
MAX_TEMPLATE = 20_000
MAX_GRADE = 1000  # largest integer grade of an ``answer: grade`` benchmark


class DeclarationError(ValueError):
    """A declaration field is unusable; the message starts with ``field '<name>'``."""


@dataclass(frozen=True)
class Declaration:
    """A benchmark declared in YAML: where its items are, how to read them and how to score them."""

    name: str
    items: Path  # absolute
    answer: str
    metric: str
    columns: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_COLUMNS))
    question_template: str | None = None
    wsi_root: Path | None = None  # None: GIANT_WSI_ROOT (the dataset resource's root)
    description: str = ""

    def spec(self) -> BenchmarkSpec:
        return BenchmarkSpec(self.name, self.metric, self.answer)


def closest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest valid choice, or ``""``."""
    match = [c for c in choices if word and c.startswith(word)][:1] or difflib.get_close_matches(
        word, list(choices), n=1, cutoff=0.5
    )
    return f" (did you mean {match[0]!r}?)" if match else ""


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a benchmark (a partition key, a folder and a file name), or None."""
    if not isinstance(name, str) or not NAME.match(name):
        shown = repr(name)[:80]
        return (
            f"{shown} is not a benchmark name: use 1-63 lower-case letters, digits, '-', '_' or '.', "
            "starting with a letter or digit"
        )
    if name in RESERVED_NAMES:
        return f"{name!r} is reserved (the inventory's row over every benchmark)"
    return None


def _text(field_name: str, value: Any, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise DeclarationError(f"field '{field_name}': expected text, got {type(value).__name__}")
    if not value.strip():
        raise DeclarationError(f"field '{field_name}': empty")
    if len(value) > limit:
        raise DeclarationError(f"field '{field_name}': {len(value)} characters, at most {limit}")
    if any(ord(c) < 32 and c not in "\t\n" for c in value) or "\x7f" in value:
        raise DeclarationError(f"field '{field_name}': contains a control character")
    return value


def _choice(field_name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        shown = repr(value)[:80]
        hint = closest(value, choices) if isinstance(value, str) else ""
        raise DeclarationError(f"field '{field_name}': {shown} is not one of {', '.join(choices)}{hint}")
    return value


def _path(field_name: str, value: Any, base: Path) -> Path:
    text = _text(field_name, value)
    if "\n" in text or "\t" in text:
        raise DeclarationError(f"field '{field_name}': a path cannot hold a tab or a line break")
    path = Path(text).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def _columns(value: Any) -> dict[str, str]:
    if value is None:
        return dict(DEFAULT_COLUMNS)
    if not isinstance(value, dict):
        raise DeclarationError("field 'columns': expected a mapping such as {id: case_id, slide: path}")
    columns = dict(DEFAULT_COLUMNS)
    for role, column in value.items():
        if role not in DEFAULT_COLUMNS:
            hint = closest(str(role), tuple(DEFAULT_COLUMNS))
            raise DeclarationError(
                f"field 'columns': unknown role {str(role)[:80]!r}{hint}; the roles are "
                f"{', '.join(DEFAULT_COLUMNS)}"
            )
        columns[role] = _text(f"columns.{role}", column, 200).strip()
    used = [c for c in columns.values()]
    twice = sorted({c for c in used if used.count(c) > 1})
    if twice:
        raise DeclarationError(f"field 'columns': column(s) {twice} given to two roles")
    return columns


def _template(value: Any) -> str | None:
    if value is None:
        return None
    text = _text("question_template", value, MAX_TEMPLATE)
    try:
        parts = [(n, spec, conv) for _, n, spec, conv in string.Formatter().parse(text) if n is not None]
    except ValueError as exc:
        raise DeclarationError(
            f"field 'question_template': {exc} (write a literal brace as {{{{ or }}}})"
        ) from None
    if any(spec or conv for _, spec, conv in parts):
        raise DeclarationError(
            "field 'question_template': placeholders take no format spec or conversion; write {question} "
            "and {options} as they are"
        )
    names = {n for n, _, _ in parts}
    unknown = sorted(names - TEMPLATE_FIELDS)
    if unknown:
        raise DeclarationError(
            f"field 'question_template': unknown placeholder(s) {unknown}; use {{question}} and {{options}}"
        )
    if "question" not in names:
        raise DeclarationError("field 'question_template': must contain {question}")
    return text


def parse_declaration(name: Any, body: Any, base: Path) -> Declaration:
    """The declaration ``name: body`` of a file in folder ``base`` (relative paths start there)."""
    why = name_problem(name)
    if why:
        raise DeclarationError(f"field 'name': {why}")
    if not isinstance(body, dict):
        raise DeclarationError("field '(benchmark)': expected a mapping of settings (items, answer, metric)")
    unknown = [str(k) for k in body if k not in FIELDS]
    if unknown:
        hint = closest(unknown[0], FIELDS)
        raise DeclarationError(
            f"field {unknown[0][:80]!r}: unknown{hint}; the fields are {', '.join(FIELDS)}"
        )
    missing = [f for f in REQUIRED_FIELDS if body.get(f) is None]
    if missing:
        raise DeclarationError(f"field '{missing[0]}': required")
    items = _path("items", body["items"], base)
    if items.suffix.lower() not in ITEM_SUFFIXES:
        raise DeclarationError(
            f"field 'items': {items.name!r} is not a {', '.join(ITEM_SUFFIXES)} file (by its extension)"
        )
    answer = _choice("answer", body["answer"], ANSWER_KINDS)
    metric = _choice("metric", body["metric"], METRIC_NAMES)
    if metric in ORDINAL_METRICS and answer != "grade":
        raise DeclarationError(
            f"field 'metric': {metric} weighs how far an answer is from the truth, so it needs ordinal "
            f"answers (answer: grade), not answer: {answer}"
        )
    wsi_root = body.get("wsi_root")
    return Declaration(
        name=name,
        items=items,
        answer=answer,
        metric=metric,
        columns=_columns(body.get("columns")),
        question_template=_template(body.get("question_template")),
        wsi_root=None if wsi_root is None else _path("wsi_root", wsi_root, base),
        description="" if body.get("description") is None else _text("description", body["description"]),
    )

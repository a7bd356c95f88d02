"""Known errata of the released MultiPathQA CSV, and what the items table does about them.

``reference/multipathqa_errata.csv`` lists released rows whose question does not fit their options and
answer, with the question the official runs asked (from the official repository's benchmark files) and
the evidence. A row is matched by content (benchmark, slide, released question, options and answer),
never by id alone, so another CSV whose ids mean other questions (the bundled sample, a later release
that fixes the text) is left as it is.

Modes: ``apply`` asks the official question (as the official runs did; the default), ``flag`` asks the
released text and marks the row, ``exclude`` drops the row.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import pandas as pd

from giant_assets.multipathqa.loading import canonical_truth, parse_options
from giant_assets.multipathqa.prompts import render_prompt

ErrataMode = Literal["apply", "flag", "exclude"]
ERRATA_MODES: tuple[str, ...] = ("apply", "flag", "exclude")
DEFAULT_ERRATA_MODE = "apply"
ERRATA_CSV_NAME = "multipathqa_errata.csv"
ERRATUM_COLUMN = "erratum"  # per item: "" (none), "applied" or "flagged"
ERRATA_MODE_COLUMN = "errata_mode"  # per item: the mode the table was built with
ACTION = {"apply": "applied", "flag": "flagged", "exclude": "excluded"}
REPORT_COLUMNS = ("benchmark_name", "benchmark_id", "row_number", "erratum", "released_question", "asked")


def errata_path() -> Path:
    """The bundled errata table."""
    return Path(str(resources.files("giant_assets.reference").joinpath(ERRATA_CSV_NAME)))


def load_errata(path: Path | None = None) -> pd.DataFrame:
    """The errata table, every cell text; ``options`` parsed to a list and ``answer`` to its label."""
    table = pd.read_csv(path or errata_path(), dtype=str, keep_default_na=False)
    table["options"] = table["options"].map(parse_options)
    table["truth_label"] = [
        canonical_truth(name, answer, options)
        for name, answer, options in zip(
            table["benchmark_name"], table["answer"], table["options"], strict=True
        )
    ]
    return table


def _question(text: str) -> str:
    """A question compared by its words: surrounding and repeated whitespace do not matter."""
    return " ".join(str(text).split())


def _key(name: str, image_path: str, question: str, options, truth: int) -> tuple:
    return (
        name,
        image_path.strip(),
        _question(question),
        tuple(() if options is None else options),
        int(truth),
    )


def match_errata(items: pd.DataFrame, errata: pd.DataFrame) -> pd.Series:
    """For each item, the position of its erratum in ``errata`` (-1 when it has none)."""
    known = {
        _key(r.benchmark_name, r.image_path, r.released_question, r.options, r.truth_label): i
        for i, r in enumerate(errata.itertuples(index=False))
    }
    keys = zip(
        items["benchmark_name"],
        items["image_path"],
        items["prompt_template"],
        items["options"],
        items["truth_label"],
        strict=True,
    )
    return pd.Series([known.get(_key(*k), -1) for k in keys], index=items.index, dtype="int64")


def handle_errata(
    items: pd.DataFrame, mode: str, errata: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Items with the known errata handled per ``mode``, and one report row per erratum found.

    Adds ``erratum`` ("" for a sound row, "applied" or "flagged") and ``errata_mode`` to every item.
    ``apply`` replaces the question (``prompt_template``) by the official one and re-renders ``prompt``.
    """
    if mode not in ERRATA_MODES:
        raise ValueError(f"errata mode {mode!r}: expected one of {', '.join(ERRATA_MODES)}")
    errata = load_errata() if errata is None else errata
    found = match_errata(items, errata) if len(items) else pd.Series([], dtype="int64")
    hit = found >= 0
    out = items.copy()
    out[ERRATUM_COLUMN] = ""
    out[ERRATA_MODE_COLUMN] = mode
    official = errata["official_question"].to_numpy()
    asked = [
        official[i] if mode == "apply" else q
        for i, q in zip(found[hit], out.loc[hit, "prompt_template"], strict=True)
    ]
    report = pd.DataFrame(
        {
            "benchmark_name": out.loc[hit, "benchmark_name"],
            "benchmark_id": out.loc[hit, "benchmark_id"],
            "row_number": out.loc[hit, "row_number"],
            "erratum": ACTION[mode],
            "released_question": out.loc[hit, "prompt_template"],
            "asked": "" if mode == "exclude" else pd.Series(asked, index=out.index[hit], dtype=object),
        },
        columns=list(REPORT_COLUMNS),
    ).reset_index(drop=True)
    if mode == "exclude":
        return out[~hit].reset_index(drop=True), report
    out.loc[hit, ERRATUM_COLUMN] = ACTION[mode]
    if mode == "apply" and hit.any():
        out.loc[hit, "prompt_template"] = asked
        out.loc[hit, "prompt"] = [
            render_prompt(q, opts) for q, opts in zip(asked, out.loc[hit, "options"], strict=True)
        ]
    return out, report


def errata_summary(items: pd.DataFrame) -> dict:
    """What a built items table did about the errata: its mode and the ids per benchmark it touched.

    A table built before errata were handled says ``mode: "none"``; an ``exclude`` table names no ids
    (the rows are gone: see ``reference/multipathqa_errata.csv``).
    """
    if ERRATA_MODE_COLUMN not in items or not len(items):
        return {"mode": "none", "items": {}}
    modes = sorted(items[ERRATA_MODE_COLUMN].dropna().unique())
    marked = items[items[ERRATUM_COLUMN].fillna("") != ""]
    ids = {
        name: sorted(group["benchmark_id"].astype(str), key=lambda s: (len(s), s))
        for name, group in marked.groupby("benchmark_name")
    }
    return {"mode": ", ".join(modes), "items": ids}


def errata_text(summary: dict) -> str:
    """One line for tables and logs, e.g. ``apply: tcga_slidebench 17, 44 (official question asked)``."""
    what = {
        "apply": "official question asked",
        "flag": "released text asked, flagged",
        "exclude": "known errata left out",
    }
    ids = "; ".join(f"{name} {', '.join(ids)}" for name, ids in summary["items"].items())
    note = what.get(summary["mode"], "")
    return (
        f"{summary['mode']}: {ids} ({note})" if ids else f"{summary['mode']}" + (f" ({note})" if note else "")
    )

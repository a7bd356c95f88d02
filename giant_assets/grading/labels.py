"""Prediction cells (text) to canonical labels, with one specific problem message per bad row."""

from __future__ import annotations

import numpy as np
import pandas as pd

from giant_assets.grading.tasks import Task

ABSTAINED = -1  # the parsed label of an empty prediction cell


def allowed_description(task: Task) -> str:
    """What a prediction may be, in words, for error messages."""
    if task.options_column:
        n = task.answers[task.options_column].map(len)
        span = f"1..{n.max()}" if n.min() == n.max() else f"1..n_options of the item ({n.min()}..{n.max()})"
        return f"an option index {span}" + (" or the option text" if task.accept_option_text else "")
    if task.allowed_labels is not None:
        labels = sorted(task.allowed_labels)
        contiguous = labels == list(range(labels[0], labels[-1] + 1))
        return f"an integer {labels[0]}..{labels[-1]}" if contiguous else f"one of {labels}"
    return "any finite number"


def _option_text_index(task: Task, ids: pd.Series, text: pd.Series) -> pd.Series:
    """1-based index of each cell's option text (case-insensitive) among its item's options, else NaN."""
    opts = task.answers[[task.id_column, task.options_column]].explode(task.options_column)
    opts["index"] = opts.groupby(level=0).cumcount() + 1
    opts["key"] = opts[task.options_column].astype(str).str.casefold()
    lookup = opts.drop_duplicates([task.id_column, "key"]).set_index([task.id_column, "key"])["index"]
    keys = pd.MultiIndex.from_arrays([ids.to_numpy(), text.str.casefold().to_numpy()])
    return pd.Series(lookup.reindex(keys).to_numpy(dtype=float), index=ids.index)


def parse_predictions(task: Task, ids: pd.Series, cells: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Parse ``cells`` (text) for items ``ids`` (all known to ``task``).

    For label tasks an empty cell (or JSON null) is an abstention, parsed as ``ABSTAINED`` (-1), which no
    truth label equals: the item counts as wrong, as a missing answer does in the metrics assets.

    Returns the parsed values (int64 for label tasks, float otherwise; only meaningful where valid) and a
    Series of problem texts (empty string where the cell is valid), both indexed like ``cells``.
    """
    text = cells.fillna("").astype(str).str.strip()
    value = pd.to_numeric(text, errors="coerce").astype(float)
    if task.options_column and task.accept_option_text:
        value = value.where(value.notna(), _option_text_index(task, ids, text))
    numeric_word = "a number" + (" nor an option of this item" if task.accept_option_text else "")
    problem = pd.Series("", index=cells.index, dtype=object)
    problem[value.isna()] = "is not " + numeric_word
    problem[text.eq("")] = "is empty"
    finite = np.isfinite(value.to_numpy())
    problem[value.notna() & ~finite] = "is not a finite number"
    is_label_task = bool(task.options_column) or task.allowed_labels is not None
    if is_label_task:
        integral = finite & (np.floor(np.where(finite, value, 0)) == value)
        problem[finite & ~integral] = "is not an integer label"
        if task.options_column:
            n_options = ids.map(task.answers.set_index(task.id_column)[task.options_column].map(len))
            in_range = (value >= 1) & (value <= n_options)
        else:
            in_range = value.isin(list(task.allowed_labels or ()))
        problem[integral & ~in_range] = "is out of range"
    if is_label_task:  # an empty cell is an abstention: a valid row, scored as a wrong answer
        problem[text.eq("")] = ""
        value[text.eq("")] = ABSTAINED
    ok = problem.eq("")
    parsed = value.where(ok, 0).astype("int64") if is_label_task else value
    return parsed, problem

"""Which runs a batch must execute: a pure plan over items, runs per item and the journal's rows.

A stored run is reused only for the question about the slide it answered: its ``item_fingerprint``
(multipathqa/fingerprint.py) is part of its journal key, so a changed question or slide runs again and
the same items under a new CSV path or a moved WSI root are reused. Two exceptions:

* a legacy row (journalled before fingerprints) is adopted only where what it stored matches the
  current item (``legacy_matches``), and is then rewritten with the fingerprint; every other legacy
  row is set aside: not reused, not deleted, counted;
* an item whose slide cannot be resolved now (an unmounted share) keeps the answers journalled for its
  question (same ``question_fingerprint``), marked ``slide_verified: False``, and runs nothing new.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from giant_assets.runs.journal import RUN_FIELDS, row_key
from giant_assets.runs.records import RETRYABLE, SLIDE_UNAVAILABLE, parse_trajectory


@dataclass
class RunPlan:
    """Every (item, run) of a result set, sorted into what to run, reuse or report as unavailable."""

    pending: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # (base, item)
    available: list[tuple[tuple, dict[str, Any]]] = field(default_factory=list)  # (journal key, item)
    unavailable: list[dict[str, Any]] = field(default_factory=list)  # finished rows: no slide now
    adopted: list[dict[str, Any]] = field(default_factory=list)  # legacy rows to rewrite with fingerprints
    reused: int = 0
    kept_unverified: int = 0  # answers kept although their slide could not be read now
    set_aside: int = 0  # legacy rows that do not match their item: not reused, left in the journal
    total_runs: int = 0


def legacy_matches(row: dict[str, Any], item: dict[str, Any]) -> bool:
    """Whether a row journalled without a fingerprint may answer ``item``: same truth label, a label
    that is one of the item's options, and, when it recorded the whole-slide overview, the same level-0
    slide size. (Legacy rows hold no question text to compare.)"""
    if int(row.get("truth_label", -1)) != int(item["truth_label"]):
        return False
    options, label = item.get("options"), row.get("predicted_label")
    if (
        isinstance(options, Sequence | np.ndarray)
        and label is not None
        and not 1 <= int(label) <= len(options)
    ):
        return False
    size = [_int(item.get("width")), _int(item.get("height"))]
    overviews = [
        s["box"][2:4]
        for s in _steps(row)
        if s.get("action") == "thumbnail" and s.get("box") and list(s["box"][:2]) == [0, 0]
    ]
    return all(list(box) == size for box in overviews)


def for_item(row: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """A stored row scored against the item's current truth label (the CSV may have corrected it)."""
    truth = int(item["truth_label"])
    label = row.get("predicted_label")
    return row | {"truth_label": truth, "correct": label is not None and int(label) == truth}


def _int(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _steps(row: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        return parse_trajectory(row.get("trajectory_json"))
    except ValueError:
        return []


def _answered(row: dict[str, Any]) -> bool:
    return row.get("error_kind") not in RETRYABLE | {SLIDE_UNAVAILABLE}


def plan_runs(
    items: Sequence[dict[str, Any]],
    *,
    identity: dict[str, Any],
    runs_per_item: int,
    done: dict[tuple, dict[str, Any]],
    retry_failed: bool,
    unavailable_row: Callable[[dict[str, Any], dict[str, Any], str], dict[str, Any]],
) -> RunPlan:
    """Plan ``runs_per_item`` runs of every item, in item order then run order.

    ``identity`` holds the result set's ``config_hash``, ``agent`` and ``model``; ``done`` the journal's
    latest row per key (``journal.row_key``). A run journalled for the item's fingerprint is reused
    unless it failed retryably and ``retry_failed``; see the module docstring for legacy rows and
    unresolved slides. ``unavailable_row(base, item, reason)`` makes the row of a run whose slide is
    unavailable and that has no answer to keep.
    """
    plan = RunPlan()
    by_run: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in done.values():
        by_run[tuple(row[k] for k in RUN_FIELDS)].append(row)
    legacy_used: set[tuple] = set()
    for item in items:
        for run_index in range(runs_per_item):
            base = identity | {
                "benchmark_name": item["benchmark_name"],
                "benchmark_id": str(item["benchmark_id"]),
                "run_index": run_index,
                "item_fingerprint": item.get("item_fingerprint"),
                "question_fingerprint": item.get("question_fingerprint"),
            }
            plan.total_runs += 1
            run = tuple(base[k] for k in RUN_FIELDS)
            if item.get("wsi_status", "ok") != "ok" or not item.get("wsi_path"):
                kept = _kept_answer(by_run.get(run, ()), item.get("question_fingerprint"))
                if kept is not None:
                    plan.kept_unverified += 1
                    plan.unavailable.append(for_item(kept, item) | {"slide_verified": False})
                    continue
                reason = item.get("wsi_error") or "slide not resolved"
                plan.unavailable.append(unavailable_row({**base, "started_at": None}, item, reason))
                continue
            key = row_key(base)
            plan.available.append((key, item))
            previous = done.get(key)
            legacy = done.get((*run, None))
            if not base["item_fingerprint"]:  # an item without a fingerprint: its rows have none either
                legacy_used.add(run)
            elif previous is None and legacy is not None and legacy_matches(legacy, item):
                previous = legacy | {k: base[k] for k in ("item_fingerprint", "question_fingerprint")}
                plan.adopted.append(previous)
                legacy_used.add(run)
            if previous is not None and not (retry_failed and previous.get("error_kind") in RETRYABLE):
                plan.reused += 1
                continue
            plan.pending.append((base, item))
    plan.set_aside = sum(
        1
        for run, rows in by_run.items()
        for row in rows
        if row.get("item_fingerprint") is None and run not in legacy_used and not _adopted_earlier(row, rows)
    )
    return plan


def _adopted_earlier(legacy: dict[str, Any], rows: Sequence[dict[str, Any]]) -> bool:
    """Whether a fingerprinted row of the same run is this legacy row rewritten (same finish time)."""
    return any(r.get("item_fingerprint") and r.get("finished_at") == legacy.get("finished_at") for r in rows)


def _kept_answer(rows: Sequence[dict[str, Any]], question_fp: str | None) -> dict[str, Any] | None:
    """The latest answered row journalled for this run of the same question (any slide), if any."""
    if not question_fp:
        return None
    same = [r for r in rows if r.get("question_fingerprint") == question_fp and _answered(r)]
    return max(same, key=lambda r: r.get("finished_at") or "", default=None)

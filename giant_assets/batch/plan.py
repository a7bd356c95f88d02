"""Which runs a batch must execute: a pure plan over items, runs per item and the journal's rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from giant_assets.batch.journal import row_key
from giant_assets.batch.records import RETRYABLE


@dataclass
class RunPlan:
    """Every (item, run) of a result set, sorted into what to run, reuse or report as unavailable."""

    pending: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # (base, item)
    available_keys: list[tuple] = field(default_factory=list)  # journal keys of runs with a slide
    unavailable: list[dict[str, Any]] = field(default_factory=list)  # finished rows: no slide
    reused: int = 0
    total_runs: int = 0


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
    latest row per key. A run already journalled is reused unless it failed retryably and
    ``retry_failed``; a run whose slide is unavailable is not run: ``unavailable_row(base, item, reason)``
    makes its row.
    """
    plan = RunPlan()
    for item in items:
        for run_index in range(runs_per_item):
            base = identity | {
                "benchmark_name": item["benchmark_name"],
                "benchmark_id": str(item["benchmark_id"]),
                "run_index": run_index,
            }
            plan.total_runs += 1
            if item.get("wsi_status", "ok") != "ok" or not item.get("wsi_path"):
                reason = item.get("wsi_error") or "slide not resolved"
                plan.unavailable.append(unavailable_row({**base, "started_at": None}, item, reason))
                continue
            key = row_key(base)
            plan.available_keys.append(key)
            previous = done.get(key)
            if previous is not None and not (retry_failed and previous.get("error_kind") in RETRYABLE):
                plan.reused += 1
                continue
            plan.pending.append((base, item))
    return plan

"""The budget decision at its edges, by hand arithmetic (binary-exact dollars): a run may start while
paid + held + its reservation stays within the budget, and never once the paid total has reached it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from giant_assets.runs.journal import Journal
from giant_assets.runs.replies import replies_path
from giant_assets.runs.run_identity import RunIdentity
from tests.runs.test_runner import ScriptAgent, items, run


def test_a_run_whose_reservation_fills_the_budget_exactly_starts(tmp_path: Path) -> None:
    """$0.25 runs under $1: the 4th starts at $0.75 paid + $0.25 reserved = $1 (not over), a 5th would
    not. Mutation: ``> budget`` as ``>= budget`` (3 runs)."""
    agent = ScriptAgent({str(i): "1" for i in range(6)}, cost=0.25)
    out = run(agent, items(6), Journal(tmp_path / "tcga.jsonl"), concurrency=1, budget_usd=1.0)
    assert len(agent.calls) == 4 and out.not_started == 2 and out.budget_stopped
    assert out.billed_usd == pytest.approx(1.0)


def test_nothing_starts_once_the_paid_total_reached_the_budget_even_with_nothing_reserved(
    tmp_path: Path,
) -> None:
    """A killed batch left $1 of replies (no journal row, so no mean cost to reserve) and runs now cost
    $0: nothing may start under a $1 budget. Mutation: the ``paid >= budget`` test dropped (paid + 0
    reserved is not over $1, and the batch would run on)."""
    journal = Journal(tmp_path / "tcga.jsonl")
    killed = RunIdentity("h", "tcga", "9", 0, None)
    replies_path(journal.path).write_text(
        json.dumps({"run": killed.key, "digest": "d", "n": 0, "cost_usd": 1.0, "at": "2026-01-01T00:00"})
        + "\n"
    )
    agent = ScriptAgent({str(i): "1" for i in range(3)}, cost=0.0)
    out = run(agent, items(3), journal, concurrency=1, budget_usd=1.0)
    assert not agent.calls and out.budget_stopped and out.not_started == 3

"""The budget decision at its edges, by hand arithmetic (binary-exact dollars): a run may start while
paid + held + its reservation stays within the budget, and never once the paid total has reached it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import pytest

from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.runs.journal import Journal
from giant_assets.runs.replies import current, replies_path
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


class PayingAgent:
    """Each run pays one $0.25 reply into the reply store at its start; run "1" then stays in flight
    until run "2" starts (at most ``wait_s``), and notes whether it did."""

    name, model = "paying", "m"

    def __init__(self, wait_s: float = 2.0) -> None:
        self.wait_s = wait_s
        self.b_paid, self.c_started = asyncio.Event(), asyncio.Event()
        self.c_started_while_b_in_flight = False

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        replies = current()
        assert replies is not None
        replies.record("d", replies.occurrence("d"), {"ok": 1}, cost_usd=0.25)
        if item.benchmark_id == "0":
            await self.b_paid.wait()
        if item.benchmark_id == "1":
            self.b_paid.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.c_started.wait(), self.wait_s)
            self.c_started_while_b_in_flight = self.c_started.is_set()
        if item.benchmark_id == "2":
            self.c_started.set()
        return AgentAnswer(text="1", steps=[Step(0, "answer", text="1", cost_usd=0.25)])

    async def aclose(self) -> None:
        return None


def test_what_a_run_in_flight_has_paid_comes_off_its_reservation(tmp_path: Path) -> None:
    """$0.50 reserved per run, $1.25 budget, 3 at a time: A and B start (1.00 held), C waits. A ends
    having paid $0.25 and B has paid $0.25 so far: paid 0.50 + B's remaining 0.25 + C's 0.50 = 1.25,
    so C starts while B is still in flight. Mutation: ``held()`` without ``- r.paid_usd`` (B's $0.25
    counted twice: 1.50, and C waits for B to end)."""
    agent = PayingAgent()
    out = run(
        agent, items(3), Journal(tmp_path / "tcga.jsonl"), concurrency=3, budget_usd=1.25, reserve_usd=0.5
    )
    assert agent.c_started_while_b_in_flight and out.executed == 3 and not out.budget_stopped
    assert out.billed_usd == pytest.approx(0.75) and out.cost_usd_new == pytest.approx(0.75)

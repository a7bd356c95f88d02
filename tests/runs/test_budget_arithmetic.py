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
from giant_assets.runs.runner import BatchSettings, run_batch
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


def test_a_cap_over_a_reply_of_unknown_cost_starts_nothing(tmp_path: Path) -> None:
    """A stored reply without a price (cost NaN): no budget can be kept over it. Mutation: the
    ``ledger.unpriced`` refusal dropped (the NaN counts as $0 and the runs start)."""
    journal = Journal(tmp_path / "tcga.jsonl")
    killed = RunIdentity("h", "tcga", "9", 0, None)
    line = {"run": killed.key, "digest": "d", "n": 0, "cost_usd": float("nan"), "at": "2026-01-01T00:00"}
    replies_path(journal.path).write_text(json.dumps(line) + "\n")
    agent = ScriptAgent({str(i): "1" for i in range(2)}, cost=0.0)
    lines: list[str] = []
    out = asyncio.run(
        run_batch(agent, items(2), config_hash="h", journal=journal,
                  settings=BatchSettings(concurrency=1, budget_usd=1.0), log=lines.append)
    )  # fmt: skip
    assert not agent.calls and out.budget_stopped and out.not_started == 2
    assert any("budget $1 cannot be kept (1 reply(ies) or run(s)" in line for line in lines)


class OverReportingAgent(PayingAgent):
    """Pays one $0.25 reply, and reports its run at $1 (as a run whose replayed replies it priced)."""

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        replies = current()
        assert replies is not None
        replies.record("d", replies.occurrence("d"), {"ok": 1}, cost_usd=0.25)
        return AgentAnswer(text="1", steps=[Step(0, "answer", text="1", cost_usd=1.0)])


def test_what_a_batch_paid_is_its_stored_replies_not_its_rows(tmp_path: Path) -> None:
    """Three runs paying $0.25 each under $1.25: each is reserved at the mean paid ($0.25), all start.
    Mutation: ``spent`` taken from the journal row although the run stored its replies (a $1 mean: the
    third run's reservation passes the budget, and the batch reports $3 paid)."""
    agent = OverReportingAgent()
    out = run(agent, items(3), Journal(tmp_path / "tcga.jsonl"), concurrency=1, budget_usd=1.25)
    assert out.cost_usd_new == pytest.approx(0.75) and out.billed_usd == pytest.approx(0.75)
    assert out.executed == 3 and not out.budget_stopped

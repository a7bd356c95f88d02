"""A provider model inside a run with a reply store (``base.SDKChatModel.complete``), against the
loopback scripted Anthropic server: the same request sent twice in one run is two paid replies (the
occurrence index), and a second execution of the run replays both, paying and recording nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import AnthropicChatModel, Message, RetryPolicy, TextPart
from giant_assets.demo.scripted import Reply, ScriptedModelServer
from giant_assets.runs.replies import ReplyStore, RunReplies, recording
from giant_assets.runs.run_identity import RunIdentity

RUN = RunIdentity("h", "tcga", "i1", 0, "fp")
ASK = (Message("user", (TextPart("Which organ?"),)),)
USD = (1000 * 2 + 100 * 8) / 1e6  # 1,000 input and 100 output tokens at $2 / $8 per 1M


async def twice(server: ScriptedModelServer, replies: RunReplies) -> list[str]:
    model = AnthropicChatModel("m", base_url=server.base_url, retry=RetryPolicy(max_attempts=1))
    model.prices = PriceTable({"m": ModelPrice(2.0, 8.0)})
    try:
        with recording(replies):
            return [(await model.complete(ASK)).text for _ in range(2)]
    finally:
        await model.aclose()


def test_a_repeated_request_is_paid_each_time_and_a_re_execution_replays_it_free(tmp_path: Path) -> None:
    """Mutations: the occurrence index forgotten in ``complete`` (the second send replays the first
    reply: one request reaches the server); a replayed reply recorded again (paid twice in the
    batch's total)."""
    path = tmp_path / "tcga.replies.jsonl"
    script = [Reply("first", usage=(1000, 100), cached=0), Reply("second", usage=(1000, 100), cached=0)]
    with ScriptedModelServer(script) as server:
        first = RunReplies(ReplyStore(path), RUN)
        assert asyncio.run(twice(server, first)) == ["first", "second"]
        assert len(server.requests) == 2 and first.recorded == 2 and first.paid_usd == pytest.approx(2 * USD)
        again = RunReplies(ReplyStore(path), RUN)
        assert asyncio.run(twice(server, again)) == ["first", "second"]
        assert len(server.requests) == 2 and again.replayed == 2
        assert (again.recorded, again.paid_usd) == (0, 0.0)
    assert len(path.read_text().splitlines()) == 2 and ReplyStore(path).total_usd == pytest.approx(2 * USD)

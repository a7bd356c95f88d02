"""Runs of an agent under a batch round, as the batch runner wraps them (for agent-level batch tests)."""

from __future__ import annotations

import asyncio
from typing import Any

from giant_assets.agents.providers.batching import BatchPending, BatchRound
from giant_assets.runs.agent_api import AgentItem


async def answer_all(agent: Any, items: list[AgentItem], batch: BatchRound | None) -> list:
    """Every item's answer (run 0), all at once: under ``batch`` (a run waiting on a provider batch in
    detach mode comes back as its ``BatchPending``), or directly without one; the agent is closed after."""

    async def one(item: AgentItem):
        if batch is None:
            return await agent.answer(item, 0)
        async with batch.run():
            try:
                return await agent.answer(item, 0)
            except BatchPending as pending:
                return pending

    try:
        return await asyncio.gather(*(one(item) for item in items))
    finally:
        await agent.aclose()
